"""Data-dependent ops and shape-like operands computed at run time, in the interpreter, against
onnxruntime: outputs whose size depends on the data, for several inputs each."""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from tests.conftest import requires_ort

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

pytestmark = requires_ort

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "dd", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs],
                          [numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _ort(model, feeds):
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _check(model, feeds, *, exact=True):
    g = ob.convert(model)
    got = ob.interpret(g, feeds)
    want = _ort(model, feeds)
    assert len(got) == len(want)
    for (name, a), b in zip(got.items(), want):
        assert a.shape == b.shape, (name, a.shape, b.shape)
        if exact:
            np.testing.assert_array_equal(a, b, err_msg=name)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)
    return g


RNG = np.random.default_rng(0)


@pytest.mark.parametrize("density", [0.0, 0.3, 1.0], ids=["none", "some", "all"])
def test_nonzero(density):
    m = _model([helper.make_node("NonZero", ["x"], ["y"])], [("x", F, [3, 4])], [("y", I64, None)])
    x = (RNG.random((3, 4)) < density).astype(np.float32) * 2
    g = _check(m, {"x": x})
    assert g.outputs[0].shape[0] == 2 and ob.ir.dims.is_runtime(g.outputs[0].shape[1])


def _nms_model(center=0, with_thresholds=True):
    ins = ["boxes", "scores", "max", "iou", "score"] if with_thresholds else ["boxes", "scores", "max"]
    node = helper.make_node("NonMaxSuppression", ins, ["sel"], center_point_box=center)
    inits = [("max", np.array([3], np.int64))]
    if with_thresholds:
        inits += [("iou", np.array([0.5], np.float32)), ("score", np.array([0.3], np.float32))]
    return _model([node], [("boxes", F, [1, 8, 4]), ("scores", F, [1, 2, 8])], [("sel", I64, None)], inits)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("center", [0, 1], ids=["corners", "center"])
def test_non_max_suppression(seed, center):
    rng = np.random.default_rng(seed)
    xy = rng.random((1, 8, 2)).astype(np.float32) * 4
    wh = rng.random((1, 8, 2)).astype(np.float32) * 2 + 0.5
    boxes = np.concatenate([xy, xy + wh], -1) if center == 0 else np.concatenate([xy, wh], -1)
    scores = rng.random((1, 2, 8)).astype(np.float32)
    _check(_nms_model(center), {"boxes": boxes, "scores": scores})


def test_non_max_suppression_without_thresholds():
    boxes = RNG.random((1, 8, 4)).astype(np.float32)
    _check(_nms_model(with_thresholds=False), {"boxes": boxes, "scores": RNG.random((1, 2, 8)).astype(np.float32)})


@pytest.mark.parametrize("axis,sorted_", [(None, 1), (None, 0), (0, 1), (1, 0)],
                         ids=["flat-sorted", "flat-unsorted", "axis0", "axis1-unsorted"])
def test_unique(axis, sorted_):
    attrs = {"sorted": sorted_} | ({} if axis is None else {"axis": axis})
    m = _model([helper.make_node("Unique", ["x"], ["y", "i", "inv", "c"], **attrs)],
               [("x", F, [4, 3])], [("y", F, None), ("i", I64, None), ("inv", I64, None), ("c", I64, None)])
    x = np.array([[1, 2, 1], [3, 2, 1], [1, 2, 1], [0, 0, 5]], np.float32)
    _check(m, {"x": x})


@pytest.mark.parametrize("axis", [None, 0, 1], ids=["flat", "axis0", "axis1"])
def test_compress_with_run_time_condition(axis):
    attrs = {} if axis is None else {"axis": axis}
    m = _model([helper.make_node("Compress", ["x", "c"], ["y"], **attrs)],
               [("x", F, [3, 3]), ("c", B, [3])], [("y", F, None)])
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    for cond in ([True, False, True], [False, False, False], [True, True, True]):
        _check(m, {"x": x, "c": np.array(cond)})


@pytest.mark.parametrize("k", [1, 3, 5])
def test_topk_with_run_time_k(k):
    m = _model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)],
               [("x", F, [2, 5]), ("k", I64, [1])], [("v", F, None), ("i", I64, None)])
    _check(m, {"x": RNG.standard_normal((2, 5)).astype(np.float32), "k": np.array([k], np.int64)})


# -- shape-like operands computed at run time -----------------------------------------------
def _one(op, data_in, extra, attrs=None, out_type=F):
    ins = [n for n, _, _ in data_in]
    return _model([helper.make_node(op, ins, ["y"], **(attrs or {}))], data_in, [("y", out_type, None)])


@pytest.mark.parametrize("shape", [[3, 4], [2, -1], [0, 3, 2]], ids=["3x4", "infer", "copy-dim"])
def test_reshape_to_a_run_time_shape(shape):
    m = _one("Reshape", [("x", F, [2, 6]), ("s", I64, [len(shape)])], None)
    _check(m, {"x": np.arange(12, dtype=np.float32).reshape(2, 6), "s": np.array(shape, np.int64)})


@pytest.mark.parametrize("shape", [[3, 1], [2, 3, 4]], ids=["same-rank", "more-dims"])
def test_expand_to_a_run_time_shape(shape):
    m = _one("Expand", [("x", F, [3, 1]), ("s", I64, [len(shape)])], None)
    _check(m, {"x": np.arange(3, dtype=np.float32).reshape(3, 1), "s": np.array(shape, np.int64)})


def test_tile_with_run_time_repeats():
    m = _one("Tile", [("x", F, [2, 2]), ("r", I64, [2])], None)
    for reps in ([1, 1], [2, 3], [0, 2]):
        _check(m, {"x": np.arange(4, dtype=np.float32).reshape(2, 2), "r": np.array(reps, np.int64)})


def test_slice_with_run_time_bounds():
    m = _one("Slice", [("x", F, [4, 5]), ("s", I64, [2]), ("e", I64, [2])], None)
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    for s, e in (([0, 1], [2, 4]), ([1, -3], [100, -1]), ([3, 0], [1, 5])):
        _check(m, {"x": x, "s": np.array(s, np.int64), "e": np.array(e, np.int64)})


def test_range_with_run_time_bounds():
    m = _one("Range", [("a", I64, []), ("b", I64, []), ("d", I64, [])], None, out_type=I64)
    for a, b, d in ((0, 5, 1), (10, 2, -3), (3, 3, 1)):
        _check(m, {"a": np.array(a), "b": np.array(b), "d": np.array(d)})


def test_constant_of_shape_with_run_time_shape():
    value = numpy_helper.from_array(np.array([1.5], np.float32))
    m = _one("ConstantOfShape", [("s", I64, [2])], None, {"value": value})
    for s in ([2, 3], [0, 4]):
        _check(m, {"s": np.array(s, np.int64)})


def test_resize_with_run_time_sizes():
    m = _model([helper.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="nearest")],
               [("x", F, [1, 1, 2, 2]), ("sz", I64, [4])], [("y", F, None)])
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    for sz in ([1, 1, 4, 4], [1, 1, 3, 5]):
        _check(m, {"x": x, "sz": np.array(sz, np.int64)})


def test_flatten_through_shape_of_a_symbolic_batch():
    """The exporter's dynamic-batch flatten: Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [("zero", np.array(0, np.int64)), ("ax", np.array([0], np.int64)),
             ("minus1", np.array([-1], np.int64))]
    m = _model(nodes, [("x", F, ["batch", 3, 4])], [("y", F, ["batch", 12])], inits)
    for n in (1, 3):
        _check(m, {"x": RNG.standard_normal((n, 3, 4)).astype(np.float32)})


# -- run-time shapes that make a node invalid ------------------------------------------------
def test_reshape_of_12_elements_to_5x5_names_node_and_values():
    m = _one("Reshape", [("x", F, [3, 4]), ("s", I64, [2])], None)
    g = ob.convert(m)
    with pytest.raises(ob.OpbridgeError, match=r"(?s)node 'Reshape_0'.*shape=\[5, 5\].*12 elements"):
        ob.interpret(g, {"x": np.zeros((3, 4), np.float32), "s": np.array([5, 5], np.int64)})


def test_negative_computed_dim_names_node_and_values():
    m = _one("ConstantOfShape", [("s", I64, [2])], None)
    g = ob.convert(m)
    with pytest.raises(ob.OpbridgeError, match=r"(?s)node 'ConstantOfShape_0'.*shape=\[2, -3\].*negative"):
        ob.interpret(g, {"s": np.array([2, -3], np.int64)})


def test_data_dependent_ops_run_on_the_host():
    g = ob.convert(_nms_model())
    assert [n.placement for n in g.nodes] == ["cpu"]


def test_position_ids_from_a_symbolic_sequence_length():
    """Range(0, Shape(x)[1]) -> Unsqueeze -> Expand to Shape(x)[0:2]: the exporter's position ids."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
             helper.make_node("Range", ["zero", "seq", "step"], ["pos"]),
             helper.make_node("Unsqueeze", ["pos", "ax0"], ["pos1"]),
             helper.make_node("Slice", ["s", "s0", "s2"], ["bs"]),
             helper.make_node("Expand", ["pos1", "bs"], ["y"])]
    inits = [("one", np.array(1, np.int64)), ("zero", np.array(0, np.int64)), ("step", np.array(1, np.int64)),
             ("ax0", np.array([0], np.int64)), ("s0", np.array([0], np.int64)), ("s2", np.array([2], np.int64))]
    m = _model(nodes, [("x", F, ["batch", "seq", 4])], [("y", I64, None)], inits)
    g = ob.convert(m)
    assert g.outputs[0].shape == ("batch", "seq")
    for b, s in ((1, 3), (2, 7)):
        _check(m, {"x": np.zeros((b, s, 4), np.float32)})
