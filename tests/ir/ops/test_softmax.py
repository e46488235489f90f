"""Softmax, LogSoftmax, Hardmax (ONNX-13 semantics) against the onnx reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import AttrError

from .onnx_ref import assert_close, run_ir, run_onnx_reference
from .test_conv import run_ort

RNG = np.random.default_rng(3)
OPS = ["Softmax", "LogSoftmax", "Hardmax"]


@pytest.mark.parametrize("axis", [None, 0, 1, -2, 2], ids=["axis=absent", "axis=0", "axis=1",
                                                           "axis=-2", "axis=2"])
@pytest.mark.parametrize("op", OPS)
def test_along_one_axis(op: str, axis: int | None) -> None:
    x = (RNG.standard_normal((2, 3, 4)) * 3).astype(np.float32)
    attrs = {} if axis is None else {"axis": axis}
    assert_close(run_ir(op, [x], **attrs)[0], run_onnx_reference(op, [x], **attrs)[0],
                 rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [np.float16, np.float64], ids=["f16", "f64"])
def test_dtypes(op: str, dtype: Any) -> None:
    x = RNG.standard_normal((3, 5)).astype(dtype)
    got = run_ir(op, [x])[0]
    assert got.dtype == dtype
    tol = 2e-3 if dtype == np.float16 else 1e-12
    assert_close(got, run_onnx_reference(op, [x])[0], rtol=tol, atol=tol)


def test_large_values_stay_finite() -> None:
    x = np.array([[1000.0, 1001.0, -1000.0]], np.float32)
    assert_close(run_ir("Softmax", [x])[0], run_onnx_reference("Softmax", [x])[0])
    # onnx.reference takes log(softmax), which underflows to -inf; onnxruntime does not
    assert_close(run_ir("LogSoftmax", [x])[0], run_ort("LogSoftmax", [x])[0], rtol=1e-5)


def test_hardmax_ties_pick_the_first() -> None:
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], np.float32)
    assert_close(run_ir("Hardmax", [x])[0], run_onnx_reference("Hardmax", [x])[0])


@pytest.mark.parametrize("op", OPS)
def test_axis_out_of_range(op: str) -> None:
    b = ob.GraphBuilder("bad")
    x = b.input("x", "f32", (2, 3))
    with pytest.raises(AttrError, match=rf"node 'sm' \({op}\) param 'axis' = 2"):
        b.op(op, [x], name="sm", axis=2)
