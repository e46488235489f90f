"""ONNX shape-op and generator mappings: one-node models converted and interpreted, against
onnxruntime (or numpy from the spec for opsets onnxruntime no longer runs)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.errors import AttrError, OpbridgeError
from tests.conftest import requires_ort
from tests.ir.ops.onnx_ref import onnx_node_model

pytestmark = requires_ort

RNG = np.random.default_rng(10)


def i64(v) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def convert(op: str, inputs: list, n_out: int = 1, *, opset: int,
            consts: tuple[int, ...] = (), **attrs):
    """A one-node model (inputs at ``consts`` are initializers), its IR graph and the feeds."""
    inits = [i in consts for i in range(len(inputs))]
    # onnx_node_model's own 'num_outputs' parameter shadows Split-18's attribute: add it after
    late = {k: attrs.pop(k) for k in ("num_outputs",) if k in attrs}
    model, feeds = onnx_node_model(op, inputs, n_out, opset=opset, initializers=inits, **attrs)
    model.graph.node[0].attribute.extend(helper.make_attribute(k, v) for k, v in late.items())
    model = onnx.shape_inference.infer_shapes(model)
    model.ir_version = min(model.ir_version, 10)  # the newest IR version onnxruntime reads
    return ob.convert(model), model, feeds


def run_ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check(op: str, inputs: list, n_out: int = 1, *, opset: int, consts: tuple[int, ...] = (),
          rtol: float = 1e-5, atol: float = 1e-6, **attrs) -> ob.Graph:
    """Convert, interpret, compare every output with onnxruntime (dtype, shape, values)."""
    g, model, feeds = convert(op, inputs, n_out, opset=opset, consts=consts, **attrs)
    got = ob.interpret(g, feeds)
    want = run_ort(model, feeds)
    for i, w in enumerate(want):
        a = got[f"out{i}"]
        assert a.dtype == w.dtype and a.shape == w.shape, (a.dtype, a.shape, w.dtype, w.shape)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(a.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(a, w)
    return g


def run_converted(op: str, inputs: list, n_out: int = 1, *, opset: int,
                  consts: tuple[int, ...] = (), **attrs) -> list[np.ndarray]:
    g, _, feeds = convert(op, inputs, n_out, opset=opset, consts=consts, **attrs)
    res = ob.interpret(g, feeds)
    return [res[f"out{i}"] for i in range(n_out)]


@pytest.mark.parametrize("shape, opset, attrs", [
    pytest.param((4, -1), 13, {}, id="opset13-minus1"),
    pytest.param((0, 12), 13, {}, id="opset13-copy0"),
    pytest.param((0, 3, 4), 14, {}, id="opset14-allowzero=absent"),
    pytest.param((2, 3, 4), 14, {"allowzero": 1}, id="opset14-allowzero=1"),
    pytest.param((24,), 5, {}, id="opset5"),
])
def test_reshape(shape, opset, attrs):
    check("Reshape", [randn(2, 3, 4), i64(shape)], opset=opset, consts=(1,), **attrs)


def test_reshape_v1_attribute():
    x = randn(2, 3, 4)
    (got,) = run_converted("Reshape", [x], opset=4, shape=[6, -1])
    np.testing.assert_array_equal(got, x.reshape(6, 4))


@requires_ort
def test_reshape_to_a_run_time_shape_is_dynamic_reshape():
    g = check("Reshape", [randn(2, 3), i64((3, 2))], opset=13)
    assert [n.op for n in g.nodes] == ["DynamicReshape"]


@pytest.mark.parametrize("axis", [None, 0, 2, -1])
def test_flatten(axis):
    attrs = {} if axis is None else {"axis": axis}
    check("Flatten", [randn(2, 3, 4)], opset=13, **attrs)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axes", [None, (0,), (-1, 0)], ids=str)
def test_squeeze(opset, axes):
    x = randn(1, 3, 1)
    if axes is None:
        check("Squeeze", [x], opset=opset)
    elif opset == 11:
        check("Squeeze", [x], opset=opset, axes=list(axes))
    else:
        check("Squeeze", [x, i64(axes)], opset=opset, consts=(1,))


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axes", [(0,), (-1, 1)], ids=str)
def test_unsqueeze(opset, axes):
    x = randn(3, 4)
    if opset == 11:
        check("Unsqueeze", [x], opset=opset, axes=list(axes))
    else:
        check("Unsqueeze", [x, i64(axes)], opset=opset, consts=(1,))


@pytest.mark.parametrize("perm", [None, (1, 0, 2)], ids=str)
def test_transpose(perm):
    check("Transpose", [randn(2, 3, 4)], opset=13, **({} if perm is None else {"perm": list(perm)}))


def test_expand_and_tile():
    check("Expand", [randn(3, 1), i64((2, 3, 4))], opset=13, consts=(1,))
    check("Tile", [randn(2, 3), i64((2, 1))], opset=13, consts=(1,))


def test_tile_v1():
    x = randn(2, 3)
    (got,) = run_converted("Tile", [x, i64(3), i64(1)], opset=5, consts=(1, 2))
    np.testing.assert_array_equal(got, np.tile(x, (1, 3)))


@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"start": -2, "end": -1}], ids=str)
def test_shape_is_folded_to_a_constant(attrs):
    g = check("Shape", [randn(2, 3, 4)], opset=15, **attrs)
    assert "Shape" not in g.op_counts()
    check("Size", [randn(2, 3, 4)], opset=13)


def test_shape_chain_feeds_reshape():
    """Shape -> Gather -> Concat -> Reshape, as exporters write it, converts (it all folds)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Concat", ["n", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [numpy_helper.from_array(i64([0]), "zero"), numpy_helper.from_array(i64([-1]), "minus1")]
    graph = helper.make_graph(nodes, "chain", [x], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, None)], initializer=inits)
    g = ob.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    assert g.op_counts() == {"Reshape": 1}
    assert g.outputs[0].shape == (2, 12)


@pytest.mark.parametrize("mode", [None, "DCR", "CRD"])
def test_depth_to_space(mode):
    check("DepthToSpace", [randn(1, 8, 2, 3)], opset=13, blocksize=2,
          **({} if mode is None else {"mode": mode}))
    check("SpaceToDepth", [randn(1, 2, 4, 6)], opset=13, blocksize=2)


def test_reverse_sequence():
    check("ReverseSequence", [randn(4, 3, 2), i64([4, 1, 2])], opset=10)


@pytest.mark.parametrize("value", [None, np.array([3], np.int32)], ids=["value=absent", "i32"])
def test_constant_of_shape(value):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    g = check("ConstantOfShape", [i64((2, 3))], opset=13, consts=(0,), **attrs)
    assert not g.nodes  # a constant


@pytest.mark.parametrize("args", [(0, 7, 2, np.int64), (5.0, 1.0, -1.5, np.float32)], ids=str)
def test_range(args):
    *vals, dt = args
    check("Range", [np.array(v, dt) for v in vals], opset=13, consts=(0, 1, 2))


@pytest.mark.parametrize("attrs", [{}, {"k": 1}, {"k": -1, "dtype": TensorProto.INT32}], ids=str)
def test_eye_like(attrs):
    check("EyeLike", [randn(3, 4)], opset=13, **attrs)


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_one_hot(axis):
    check("OneHot", [i64([[0, 2], [-1, 5]]), i64(3), np.array([0.5, 2.0], np.float32)], opset=13,
          consts=(1, 2), **({} if axis is None else {"axis": axis}))


@pytest.mark.parametrize("upper, k", [(None, None), (0, 1), (1, -1)], ids=str)
def test_trilu(upper, k):
    ins = [randn(3, 4)] + ([] if k is None else [i64(k)])
    check("Trilu", ins, opset=14, consts=(1,) if k is not None else (),
          **({} if upper is None else {"upper": upper}))


def test_unknown_attribute_is_named():
    with pytest.raises(AttrError, match=r"attribute 'bogus'"):
        convert("Flatten", [randn(2, 3)], opset=13, bogus=1)


def test_bad_value_names_node():
    with pytest.raises(OpbridgeError, match=r"\(Transpose\).*perm"):
        convert("Transpose", [randn(2, 3)], opset=13, perm=[0, 0])
