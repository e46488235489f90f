"""Reductions, ArgMax/ArgMin, CumSum, TopK against the onnx reference (opset 21: axes/k inputs)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import AttrError

from .onnx_ref import assert_close, run_ir, run_onnx_reference

RNG = np.random.default_rng(9)
REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]

AXES_CASES = {
    "axes=absent": (None, {}),
    "axes=1": ([1], {}),
    "axes=0,2": ([0, 2], {}),
    "axes=-1": ([-1], {}),
    "keepdims=0": ([1], {"keepdims": 0}),
    "all-keepdims=0": (None, {"keepdims": 0}),
    "noop": (None, {"noop_with_empty_axes": 1}),
}


def _data(op: str) -> np.ndarray:
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    if op == "ReduceLogSum":
        x = np.abs(x) + 0.1
    if op == "ReduceProd":
        x = x * 0.5 + 1.0
    return x


@pytest.mark.parametrize("case", list(AXES_CASES))
@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce(op: str, case: str) -> None:
    axes, attrs = AXES_CASES[case]
    x = _data(op)
    ref_inputs = [x] if axes is None else [x, np.array(axes, np.int64)]
    expected = run_onnx_reference(op, ref_inputs, **attrs)[0]
    ir_attrs = dict(attrs) if axes is None else {**attrs, "axes": axes}
    assert_close(run_ir(op, [x], **ir_attrs)[0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64], ids=["i32", "i64", "f64"])
def test_reduce_dtypes(op: str, dtype: Any) -> None:
    x = RNG.integers(-3, 4, (3, 4)).astype(dtype)
    got = run_ir(op, [x], axes=[1])[0]
    assert got.dtype == dtype
    assert_close(got, run_onnx_reference(op, [x, np.array([1], np.int64)])[0])


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_bool(op: str) -> None:
    x = RNG.integers(0, 2, (3, 4)).astype(bool)
    got = run_ir(op, [x], axes=[0])[0]
    np.testing.assert_array_equal(got, run_onnx_reference(op, [x, np.array([0], np.int64)])[0])


def test_reduce_logsumexp_is_stable() -> None:
    x = np.array([[1000.0, 1000.0], [-1000.0, -1001.0]], np.float32)
    expected = run_onnx_reference("ReduceLogSumExp", [x, np.array([1], np.int64)])[0]
    assert_close(run_ir("ReduceLogSumExp", [x], axes=[1])[0], expected, rtol=1e-6)


@pytest.mark.parametrize("attrs", [
    {}, {"axis": 1}, {"axis": -1, "keepdims": 0}, {"select_last_index": 1},
    {"axis": 2, "select_last_index": 1, "keepdims": 0},
], ids=["absent", "axis=1", "axis=-1-keepdims=0", "select_last_index=1", "axis=2-last-keepdims=0"])
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg(op: str, attrs: dict[str, Any]) -> None:
    x = RNG.integers(0, 3, (3, 4, 5)).astype(np.float32)  # many ties
    got = run_ir(op, [x], **attrs)[0]
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, run_onnx_reference(op, [x], **attrs)[0])


@pytest.mark.parametrize("flags", [{}, {"exclusive": 1}, {"reverse": 1}, {"exclusive": 1, "reverse": 1}],
                         ids=["flags=absent", "exclusive", "reverse", "exclusive+reverse"])
@pytest.mark.parametrize("axis", [0, 1, -1], ids=["axis=0", "axis=1", "axis=-1"])
def test_cumsum(axis: int, flags: dict[str, int]) -> None:
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    expected = run_onnx_reference("CumSum", [x, np.array(axis, np.int64)], **flags)[0]
    assert_close(run_ir("CumSum", [x], axis=axis, **flags)[0], expected, rtol=1e-5, atol=1e-6)


def test_cumsum_int() -> None:
    x = RNG.integers(-5, 5, (2, 6)).astype(np.int32)
    got = run_ir("CumSum", [x], axis=1, exclusive=1)[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(
        got, run_onnx_reference("CumSum", [x, np.array(1, np.int64)], exclusive=1)[0])


@pytest.mark.parametrize("attrs", [
    {}, {"axis": 0}, {"largest": 0}, {"axis": 1, "largest": 0}, {"sorted": 1, "axis": -2},
], ids=["absent", "axis=0", "largest=0", "axis=1-smallest", "sorted=1-axis=-2"])
@pytest.mark.parametrize("k", [1, 3])
def test_topk(k: int, attrs: dict[str, Any]) -> None:
    x = RNG.integers(0, 4, (4, 5)).astype(np.float32)  # ties: lower index first
    vals, idx = run_ir("TopK", [x], k=k, **attrs)
    rv, ri = run_onnx_reference("TopK", [x, np.array([k], np.int64)], 2, **attrs)
    assert_close(vals, rv)
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(idx, ri)


def test_topk_unsigned() -> None:
    x = np.array([[3, 250, 7, 250, 0]], np.uint8)
    vals, idx = run_ir("TopK", [x], k=3)
    rv, ri = run_onnx_reference("TopK", [x, np.array([3], np.int64)], 2)
    np.testing.assert_array_equal(vals, rv)
    np.testing.assert_array_equal(idx, ri)


# -- errors --------------------------------------------------------------------------------
def _op(op: str, shape: tuple[int, ...], **attrs: Any) -> None:
    b = ob.GraphBuilder("bad")
    x = b.input("x", "f32", shape)
    b.op(op, [x], name="r1", **attrs)


@pytest.mark.parametrize("op, attrs, attr", [
    ("ReduceSum", {"axes": [3]}, "axes"),
    ("ReduceMean", {"axes": [1, -2]}, "axes"),
    ("ReduceMax", {"keepdims": 2}, "keepdims"),
    ("ArgMax", {"axis": -4}, "axis"),
    ("CumSum", {}, "axis"),
    ("TopK", {"k": 5}, "k"),
    ("TopK", {}, "k"),
], ids=["axes-out-of-range", "axes-duplicate", "keepdims=2", "argmax-axis", "cumsum-axis-absent",
        "topk-k-too-large", "topk-k-absent"])
def test_errors_name_the_attribute(op: str, attrs: dict[str, Any], attr: str) -> None:
    with pytest.raises(AttrError, match=rf"node 'r1' \({op}\) param '{attr}'"):
        _op(op, (2, 3, 4), **attrs)
