"""Tensor ops (Concat, Split, Slice, Pad, Gather*, Scatter*) against onnx.reference and onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from opbridge.errors import AttrError, InterpretError, ShapeError
from opbridge.ir.ops.tensor import split_sizes
from tests.conftest import requires_ort

from .onnx_ref import assert_close, onnx_node_model, run_ir, run_onnx_reference

RNG = np.random.default_rng(1)
I64_MAX, I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _i64(v) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def run_ort(op: str, inputs: list, **attrs) -> np.ndarray:
    """The one-node ONNX model in onnxruntime (for cases onnx.reference gets wrong or rejects)."""
    import onnxruntime as ort

    model, feeds = onnx_node_model(op, inputs, **attrs)
    model.ir_version = min(model.ir_version, 10)  # the newest IR version onnxruntime reads
    out = model.graph.output[0]  # onnxruntime wants a typed output; these ops keep x's dtype
    out.type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(inputs[0].dtype)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("n", [1, 3])
def test_concat(axis, n):
    xs = []
    for i in range(n):
        shape = [2, 3, 4]
        shape[axis] = i + 1
        xs.append(_x(*shape))
    assert_close(run_ir("Concat", xs, axis=axis)[0], run_onnx_reference("Concat", xs, axis=axis)[0])


def test_concat_mismatch():
    with pytest.raises(ShapeError, match=r"node 'node' \(Concat\): input 1 has shape \[2, 4\]"):
        run_ir("Concat", [_x(2, 3), _x(2, 4)], axis=0)
    with pytest.raises(AttrError, match=r"\(Concat\) param 'axis': required"):
        run_ir("Concat", [_x(2, 3)])


@pytest.mark.parametrize("shape, axis, split", [
    pytest.param((6, 4), None, (2, 4), id="axis=absent"),
    pytest.param((6, 4), 1, (1, 1, 2), id="axis=1"),
    pytest.param((6, 4), -1, (4,), id="one-piece"),
    pytest.param((6, 4), 0, (0, 6), id="zero-piece"),
])
def test_split(shape, axis, split):
    x = _x(*shape)
    attrs = {} if axis is None else {"axis": axis}
    want = run_onnx_reference("Split", [x, _i64(split)], len(split), **attrs)
    got = run_ir("Split", [x], split=split, **attrs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w)


@pytest.mark.parametrize("shape, axis, num", [
    pytest.param((6, 4), 0, 3, id="num=3-even"),
    pytest.param((7, 4), 0, 3, id="num=3-uneven"),
    pytest.param((2, 5), -1, 2, id="num=2-negative-axis"),
])
def test_split_sizes_match_num_outputs(shape, axis, num):
    """split_sizes (what mappings use for ONNX's num_outputs) follows Split-18's rule."""
    x = _x(*shape)
    model, feeds = _split18_model(x, axis, num)
    want = ReferenceEvaluator(model).run(None, feeds)
    sizes = split_sizes(shape[axis], (), num)
    got = run_ir("Split", [x], split=sizes, axis=axis)
    assert [w.shape for w in want] == [g.shape for g in got]
    for g, w in zip(got, want):
        assert_close(g, w)


def _split18_model(x: np.ndarray, axis: int, num: int):
    model, feeds = onnx_node_model("Split", [x], num, opset=18, axis=axis)
    model.graph.node[0].attribute.append(helper.make_attribute("num_outputs", num))
    return model, feeds


@pytest.mark.parametrize("split, match", [
    pytest.param((2, 2), r"sum to the axis size 6", id="bad-sum"),
    pytest.param((), r"is empty", id="empty"),
])
def test_split_errors(split, match):
    with pytest.raises(AttrError, match=rf"\(Split\) param 'split': .*{match}"):
        run_ir("Split", [_x(6, 2)], split=split)
    with pytest.raises(AttrError, match=r"\(Split\) param 'split': required"):
        run_ir("Split", [_x(6, 2)])


def test_split_sizes_rejects():
    assert "cannot be split into 5" in split_sizes(6, (), 5)
    assert "num_outputs is 4" in split_sizes(6, (3, 3), 4)


SLICES = [
    pytest.param((1,), (3,), None, None, id="axes=absent-steps=absent"),
    pytest.param((0, 1), (2, 3), (0, 1), (1, 1), id="2d"),
    pytest.param((-3,), (-1,), (1,), None, id="negative-bounds"),
    pytest.param((-1,), (-6,), (2,), (-1,), id="step=-1-full"),
    pytest.param((4,), (0,), (-1,), (-2,), id="step=-2"),
    pytest.param((I64_MAX,), (I64_MIN,), (0,), (-1,), id="sentinels-reverse"),
    pytest.param((0,), (I64_MAX,), (2,), (3,), id="sentinel-end-step3"),
    pytest.param((-100,), (100,), (-1,), None, id="clamp-out-of-range"),
    pytest.param((10,), (20,), (1,), None, id="empty-start-past-end"),
    pytest.param((3,), (1,), (0,), None, id="empty-start>end"),
    pytest.param((1, 0), (1000, 1000), (2, 0), (2, 1), id="unsorted-axes"),
    pytest.param((5,), (-7,), (1,), (-2,), id="negative-step-clamp"),
]


@pytest.mark.parametrize("starts, ends, axes, steps", SLICES)
def test_slice(starts, ends, axes, steps):
    x = _x(4, 5, 6)
    onnx_in = [x, _i64(starts), _i64(ends)] + [None if axes is None else _i64(axes)]
    onnx_in += [] if steps is None else [_i64(steps)]
    if axes is None and steps is None:
        onnx_in = onnx_in[:3]
    attrs = {"starts": starts, "ends": ends}
    attrs |= {} if axes is None else {"axes": axes}
    attrs |= {} if steps is None else {"steps": steps}
    assert_close(run_ir("Slice", [x], **attrs)[0], run_onnx_reference("Slice", onnx_in)[0])


@pytest.mark.parametrize("attrs, param, match", [
    pytest.param({"starts": (0,), "ends": (1, 2)}, "ends", r"has 2 entries", id="length"),
    pytest.param({"starts": (0,), "ends": (1,), "steps": (0,)}, "steps", r"0 step", id="zero-step"),
    pytest.param({"starts": (0,), "ends": (1,), "axes": (3,)}, "axes", r"out of range", id="axis"),
    pytest.param({"starts": (0, 0), "ends": (1, 1), "axes": (0, -3)}, "axes", r"twice", id="dup"),
])
def test_slice_errors(attrs, param, match):
    with pytest.raises(AttrError, match=rf"\(Slice\) param '{param}': .*{match}"):
        run_ir("Slice", [_x(2, 3, 4)], **attrs)


PADS = [
    pytest.param((1, 2, 3, 0), None, None, id="mode=absent-value=absent"),
    pytest.param((1, 2, 3, 0), "constant", 1.5, id="constant-value"),
    pytest.param((2, 1, 1, 2), "reflect", None, id="reflect"),
    pytest.param((3, 3, 3, 3), "edge", None, id="edge"),
    pytest.param((2, 1, 1, 2), "wrap", None, id="wrap"),
    pytest.param((0, 0, 0, 0), "reflect", None, id="zero-pads"),
]


@pytest.mark.parametrize("pads, mode, value", PADS)
def test_pad(pads, mode, value):
    x = _x(4, 5)
    attrs = {} if mode is None else {"mode": mode}
    onnx_in = [x, _i64(pads)] + ([] if value is None else [np.array(value, np.float32)])
    got = run_ir("Pad", [x], pads=pads, **attrs, **({} if value is None else {"value": value}))[0]
    assert_close(got, run_onnx_reference("Pad", onnx_in, **attrs)[0])


@pytest.mark.parametrize("axes", [(1,), (-1,), (0, 2)], ids=str)
def test_pad_axes(axes):
    x = _x(2, 3, 4)
    pads = tuple(range(1, 2 * len(axes) + 1))
    got = run_ir("Pad", [x], pads=pads, axes=axes, mode="edge")[0]
    want = run_onnx_reference("Pad", [x, _i64(pads), None, _i64(axes)], mode="edge")[0]
    assert_close(got, want)


@requires_ort
@pytest.mark.parametrize("pads, mode", [
    pytest.param((-1, 2, 1, -2), "constant", id="constant-crop"),
    pytest.param((-1, 2, 1, -2), "edge", id="edge-crop"),
    pytest.param((1, -1, -1, 2), "reflect", id="reflect-crop"),
])
def test_pad_negative_vs_onnxruntime(pads, mode):
    """onnx.reference rejects negative pads; onnxruntime crops, the reference we use here."""
    x = _x(4, 5)
    want = run_ort("Pad", [x, _i64(pads)], mode=mode)
    assert_close(run_ir("Pad", [x], pads=pads, mode=mode)[0], want)


@pytest.mark.parametrize("pads, mode, match", [
    pytest.param((1, 1), "constant", r"2 per padded axis", id="length"),
    pytest.param((5, 0, 0, 0), "reflect", r"reflect padding of 5", id="reflect-too-far"),
    pytest.param((-5, 0, 0, 0), "constant", r"crops more", id="over-crop"),
])
def test_pad_errors(pads, mode, match):
    with pytest.raises(AttrError, match=rf"\(Pad\) param 'pads': .*{match}"):
        run_ir("Pad", [_x(4, 5)], pads=pads, mode=mode)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("idx", [[0, 2, -1], [[1, -3], [0, 0]], 1], ids=["1d", "2d-neg", "scalar"])
def test_gather(axis, idx):
    x = _x(3, 4, 3)
    attrs = {} if axis is None else {"axis": axis}
    i = _i64(idx)
    assert_close(run_ir("Gather", [x, i], **attrs)[0], run_onnx_reference("Gather", [x, i], **attrs)[0])


def test_gather_out_of_range():
    with pytest.raises(InterpretError, match=r"node 'node' \(Gather\).*index 5 is out of range"):
        run_ir("Gather", [_x(3, 4), _i64([0, 5])])
    with pytest.raises(ShapeError, match=r"\(Gather\): indices span"):
        run_ir("Gather", [_x(3, 4), _i64([0, 5])], const=[False, True])


@pytest.mark.parametrize("axis", [None, 0, 1, pytest.param(-1, marks=requires_ort)])
def test_gather_elements(axis):
    x = _x(3, 4)
    idx = RNG.integers(-3, 3, size=(2, 4) if axis in (None, 0) else (3, 2)).astype(np.int64)
    attrs = {} if axis is None else {"axis": axis}
    # onnx.reference mishandles a negative axis in GatherElements; onnxruntime is the reference there
    want = run_ort("GatherElements", [x, idx], **attrs) if (axis or 0) < 0 else \
        run_onnx_reference("GatherElements", [x, idx], **attrs)[0]
    assert_close(run_ir("GatherElements", [x, idx], **attrs)[0], want)


@pytest.mark.parametrize("shape, idx, batch_dims", [
    pytest.param((2, 3), [[0, 1], [1, -1]], None, id="full-index-batch=absent"),
    pytest.param((2, 3, 4), [[1], [0]], None, id="slices"),
    pytest.param((2, 3, 4), [[[0, 1]], [[1, 2]]], 0, id="3d-indices"),
    pytest.param((2, 3, 4), [[1], [0]], 1, id="batch_dims=1"),
    pytest.param((2, 3, 4), [[[1, 2]], [[0, 3]]], 1, id="batch_dims=1-full"),
])
def test_gather_nd(shape, idx, batch_dims):
    x = _x(*shape)
    i = _i64(idx)
    attrs = {} if batch_dims is None else {"batch_dims": batch_dims}
    assert_close(run_ir("GatherND", [x, i], **attrs)[0],
                 run_onnx_reference("GatherND", [x, i], **attrs)[0])


def test_gather_nd_bad_last_dim():
    with pytest.raises(ShapeError, match=r"\(GatherND\): indices \[1, 3\] do not fit"):
        run_ir("GatherND", [_x(2, 2), _i64([[0, 0, 0]])])


@pytest.mark.parametrize("reduction", [None, "none", "add", "mul", "max", "min"])
def test_scatter_nd(reduction):
    x = _x(4, 3)
    idx = _i64([[1], [3], [1]] if reduction not in (None, "none") else [[1], [-1]])
    upd = _x(len(idx), 3)
    attrs = {} if reduction is None else {"reduction": reduction}
    assert_close(run_ir("ScatterND", [x, idx, upd], **attrs)[0],
                 run_onnx_reference("ScatterND", [x, idx, upd], **attrs)[0])


def test_scatter_nd_full_index():
    x, idx, upd = _x(2, 3), _i64([[0, 2], [1, 0]]), _x(2)
    assert_close(run_ir("ScatterND", [x, idx, upd])[0],
                 run_onnx_reference("ScatterND", [x, idx, upd])[0])


def test_scatter_nd_bad_updates():
    with pytest.raises(ShapeError, match=r"\(ScatterND\): updates have shape \[2\]"):
        run_ir("ScatterND", [_x(4, 3), _i64([[1], [2]]), _x(2)])


@pytest.mark.parametrize("axis", [None, 1, -2])
@pytest.mark.parametrize("reduction", [None, "add", "mul", "max", "min"])
def test_scatter_elements(axis, reduction):
    x = _x(3, 4)
    if axis in (None, -2):
        idx = _i64([[0, 1, -1, 2], [0, 1, 1, 2]])
    else:
        idx = _i64([[0, 3], [1, -1], [2, 2]])
    upd = _x(*idx.shape)
    attrs = {k: v for k, v in (("axis", axis), ("reduction", reduction)) if v is not None}
    if reduction is None:  # without a reduction repeated indices are unspecified: one row
        idx, upd = idx[:1], upd[:1]
    assert_close(run_ir("ScatterElements", [x, idx, upd], **attrs)[0],
                 run_onnx_reference("ScatterElements", [x, idx, upd], **attrs)[0])
