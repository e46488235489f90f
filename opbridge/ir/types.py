"""Element types and shapes of IR values.

A dtype is a short string (``"f32"``); :data:`DTYPES` lists them. The low-precision types
(:data:`LOWP_DTYPES`) are ml_dtypes' (one element per byte in memory) under ONNX's names:

=============  ====================  =============================
IR dtype       ml_dtypes             ONNX TensorProto
=============  ====================  =============================
``f8e4m3fn``   ``float8_e4m3fn``     ``FLOAT8E4M3FN`` (17)
``f8e4m3fnuz`` ``float8_e4m3fnuz``   ``FLOAT8E4M3FNUZ`` (18)
``f8e5m2``     ``float8_e5m2``       ``FLOAT8E5M2`` (19)
``f8e5m2fnuz`` ``float8_e5m2fnuz``   ``FLOAT8E5M2FNUZ`` (20)
``u4``         ``uint4``             ``UINT4`` (21)
``i4``         ``int4``              ``INT4`` (22)
``f4e2m1``     ``float4_e2m1fn``     ``FLOAT4E2M1`` (23)
``f8e8m0``     ``float8_e8m0fnu``    ``FLOAT8E8M0`` (24)
``u2``         ``uint2``             ``UINT2`` (25)
``i2``         ``int2``              ``INT2`` (26)
=============  ====================  =============================

A shape is a tuple whose entries are ints, or strings for symbolic dims: names such as
``"batch"``, expressions of them such as ``"3*batch"`` (kept canonical, see
:mod:`opbridge.ir.dims`), and dims only the run knows (``"?nms.n"``, from data-dependent ops).
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from ..errors import ShapeError
from .dims import canonical

DType = str
Dim = int | str
Shape = tuple[Dim, ...]

#: dtype name -> numpy dtype. bf16 comes from ml_dtypes (the package onnx itself uses).
_NUMPY: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f64": np.dtype(np.float64),
    "i8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "i16": np.dtype(np.int16),
    "u16": np.dtype(np.uint16),
    "i32": np.dtype(np.int32),
    "u32": np.dtype(np.uint32),
    "i64": np.dtype(np.int64),
    "u64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
    "f8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "f8e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "f8e8m0": np.dtype(ml_dtypes.float8_e8m0fnu),
    "f4e2m1": np.dtype(ml_dtypes.float4_e2m1fn),
    "i4": np.dtype(ml_dtypes.int4),
    "u4": np.dtype(ml_dtypes.uint4),
    "i2": np.dtype(ml_dtypes.int2),
    "u2": np.dtype(ml_dtypes.uint2),
}
DTYPES: tuple[str, ...] = tuple(_NUMPY)
FLOAT_DTYPES = ("f32", "f16", "bf16", "f64")
INT_DTYPES = ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")
NUMERIC_DTYPES = FLOAT_DTYPES + INT_DTYPES
ALL_DTYPES = NUMERIC_DTYPES + ("bool",)
#: Low-precision storage types: Cast, CastLike, QuantizeLinear/DequantizeLinear and data
#: movement take them; arithmetic does not (cast to a wider type first).
LOWP_FLOAT_DTYPES = ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "f8e8m0", "f4e2m1")
LOWP_INT_DTYPES = ("i4", "u4", "i2", "u2")
LOWP_DTYPES = LOWP_FLOAT_DTYPES + LOWP_INT_DTYPES

_FROM_NUMPY = {v: k for k, v in _NUMPY.items()}

#: The largest number of elements a single tensor may declare; checked before any
#: allocation so that absurd shapes in hostile files fail cleanly.
MAX_ELEMENTS = 1 << 34


def to_numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype for an IR dtype name."""
    try:
        return _NUMPY[dtype]
    except (KeyError, TypeError):
        raise ShapeError(
            f"unknown dtype {dtype!r}", hint=f"use one of {', '.join(DTYPES)}"
        ) from None


def from_numpy_dtype(dt: Any) -> str:
    """The IR dtype name for a numpy dtype (or anything ``np.dtype`` accepts)."""
    try:
        return _FROM_NUMPY[np.dtype(dt)]
    except (KeyError, TypeError):
        raise ShapeError(
            f"numpy dtype {dt!r} has no IR dtype", hint=f"cast to one of {', '.join(DTYPES)}"
        ) from None


def is_dtype(dtype: Any) -> bool:
    return isinstance(dtype, str) and dtype in _NUMPY


def itemsize(dtype: str) -> int:
    return to_numpy_dtype(dtype).itemsize


def is_static(shape: Shape) -> bool:
    """Whether every dim is an int (no symbolic or run-time dims)."""
    return all(isinstance(d, int) for d in shape)


def numel(shape: Shape) -> int:
    """Number of elements of a static shape."""
    return math.prod(int(d) for d in shape)


def check_shape(shape: Any, what: str) -> Shape:
    """Normalise a shape to a tuple; reject negative or absurd dims before any allocation."""
    try:
        dims = tuple(shape)
    except TypeError:
        raise ShapeError(f"{what}: shape {shape!r} is not a sequence of dims") from None
    out: list[Dim] = []
    for d in dims:
        if isinstance(d, (bool, np.bool_)):
            raise ShapeError(f"{what}: shape {dims!r} has a boolean dim")
        if isinstance(d, (int, np.integer)):
            if d < 0:
                raise ShapeError(f"{what}: shape {dims!r} has a negative dim")
            out.append(int(d))
        elif isinstance(d, str) and d:
            out.append(canonical(d))
        else:
            raise ShapeError(f"{what}: shape {dims!r} has a dim {d!r} that is neither int nor name")
    result = tuple(out)
    # non-zero dims only: an empty tensor whose other dims are absurd is still absurd (numpy
    # cannot even describe a [0, 2**62] array)
    extent = math.prod(d for d in result if isinstance(d, int) and d)
    if extent > MAX_ELEMENTS:
        raise ShapeError(
            f"{what}: shape {result} spans {extent} elements, above the limit of {MAX_ELEMENTS}",
            hint="check the model's declared shapes; raise opbridge.ir.types.MAX_ELEMENTS if it is real",
        )
    return result


def format_shape(shape: Shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"
