"""Generators and masks (ConstantOfShape, Range, EyeLike, OneHot, Trilu) against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper

from opbridge.errors import AttrError, ShapeError
from opbridge.ir.types import from_numpy_dtype

from .onnx_ref import assert_close, run_ir, run_onnx_reference

RNG = np.random.default_rng(2)


def _i64(v) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def _from_shape_ref(shape, **attrs) -> np.ndarray:
    return run_onnx_reference("ConstantOfShape", [_i64(shape)], **attrs)[0]


@pytest.mark.parametrize("shape", [(2, 3), (4,), (0, 2)], ids=str)
@pytest.mark.parametrize("value", [None, np.array([2.5], np.float32), np.array([7], np.int32)],
                         ids=["value=absent", "f32", "i32"])
def test_constant_of_shape(shape, value):
    onnx_attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    ir_attrs = {} if value is None else {"value": value}
    got = run_ir("ConstantOfShape", [], shape=shape, **ir_attrs)[0]
    want = _from_shape_ref(shape, **onnx_attrs)
    assert got.dtype == want.dtype
    assert_close(got, want)


def test_constant_of_shape_bad_value():
    with pytest.raises(AttrError, match=r"\(ConstantOfShape\) param 'value': has 2 elements"):
        run_ir("ConstantOfShape", [], shape=(2,), value=np.zeros(2, np.float32))


@pytest.mark.parametrize("start, limit, delta, dtype", [
    (0, 5, 1, np.int64), (10, 4, -3, np.int32), (1.0, 2.0, 0.3, np.float32), (0, 0, 1, np.int64),
    (5, 0, 1, np.int64), (-1.5, 1.5, 0.5, np.float64),
], ids=str)
def test_range(start, limit, delta, dtype):
    args = [np.array(v, dtype) for v in (start, limit, delta)]
    want = run_onnx_reference("Range", args)[0]
    got = run_ir("Range", [], start=start, limit=limit, delta=delta,
                 dtype=from_numpy_dtype(dtype))[0]
    assert got.dtype == want.dtype
    assert_close(got, want)


def test_range_errors():
    with pytest.raises(AttrError, match=r"\(Range\) param 'delta': is 0"):
        run_ir("Range", [], start=0, limit=1, delta=0, dtype="f32")
    with pytest.raises(AttrError, match=r"\(Range\) param 'dtype': .*not integers"):
        run_ir("Range", [], start=0, limit=1, delta=0.5, dtype="i32")


@pytest.mark.parametrize("k", [None, 0, 1, -2, 5])
@pytest.mark.parametrize("dtype", [None, "i32"])
def test_eye_like(k, dtype):
    x = np.zeros((3, 4), np.float32)
    attrs = {} if k is None else {"k": k}
    onnx_dt = {} if dtype is None else {"dtype": TensorProto.INT32}
    want = run_onnx_reference("EyeLike", [x], **attrs, **onnx_dt)[0]
    got = run_ir("EyeLike", [x], **attrs, **({} if dtype is None else {"dtype": dtype}))[0]
    assert got.dtype == want.dtype
    assert_close(got, want)


def test_eye_like_rank():
    with pytest.raises(ShapeError, match=r"\(EyeLike\): input has rank 3"):
        run_ir("EyeLike", [np.zeros((2, 2, 2), np.float32)])


@pytest.mark.parametrize("axis", [None, 0, 1, -1, -2])
@pytest.mark.parametrize("values", [np.array([0, 1], np.float32), np.array([-2, 5], np.int64)],
                         ids=["f32", "i64"])
def test_one_hot(axis, values):
    idx = _i64([[0, 3, -1], [2, 7, -6]])  # 7 and -6 are out of range for depth 5: all off
    attrs = {} if axis is None else {"axis": axis}
    want = run_onnx_reference("OneHot", [idx, _i64(5), values], **attrs)[0]
    got = run_ir("OneHot", [idx], depth=5, values=values, **attrs)[0]
    assert_close(got, want)


def test_one_hot_float_indices():
    idx = np.array([0.0, 2.0, 1.0], np.float32)
    values = np.array([0, 1], np.float32)
    want = run_onnx_reference("OneHot", [idx, np.array(3, np.float32), values])[0]
    assert_close(run_ir("OneHot", [idx], depth=3, values=values)[0], want)


def test_one_hot_bad_values():
    with pytest.raises(AttrError, match=r"\(OneHot\) param 'values': has 3 elements"):
        run_ir("OneHot", [_i64([0])], depth=2, values=np.zeros(3, np.float32))


@pytest.mark.parametrize("upper", [None, 0, 1])
@pytest.mark.parametrize("k", [None, 0, 2, -1, -9])
@pytest.mark.parametrize("shape", [(4, 5), (2, 5, 3)], ids=str)
def test_trilu(upper, k, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    attrs = {} if upper is None else {"upper": upper}
    onnx_in = [x] + ([] if k is None else [_i64(k)])
    want = run_onnx_reference("Trilu", onnx_in, **attrs)[0]
    got = run_ir("Trilu", [x], **attrs, **({} if k is None else {"k": k}))[0]
    assert_close(got, want)
