"""Ops that generate tensors (ConstantOfShape, Range, EyeLike, OneHot) or mask them (Trilu).

ONNX passes their sizes and fill values as inputs; they are attributes here, so every
output shape is static.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op
from ..types import from_numpy_dtype, to_numpy_dtype
from .common import ALL, NUMERIC


# -- ConstantOfShape -----------------------------------------------------------------------
def _cos_shape(ctx: ShapeContext) -> Any:
    shape, value = ctx.attr("shape"), ctx.attr("value")
    if any(d < 0 for d in shape):
        raise ctx.error(f"{list(shape)} has a negative dim", attr="shape",
                        hint="dims must be >= 0: check the shape input")
    if value.size != 1:
        raise ctx.error(f"has {value.size} elements; it needs exactly one", attr="value",
                        hint="give the value as a one-element tensor")
    return tuple(shape), from_numpy_dtype(value.dtype)


(
    define_op("ConstantOfShape")
    .doc("A tensor of `shape` filled with the single element of `value` (and its dtype).")
    .output("y", "T")
    .param("shape", "ints", doc="ONNX's input")
    .param("value", "tensor", np.zeros(1, np.float32), doc="one element; default f32 0")
    .type_param("T", ALL)
    .shape_fn(_cos_shape)
    .compute(lambda shape, value: np.full(shape, value.reshape(()), dtype=value.dtype))
)


# -- Range ---------------------------------------------------------------------------------
def range_len(start: float, limit: float, delta: float) -> int:
    """The number of elements of Range(start, limit, delta) (ONNX: ceil((limit - start) / delta))."""
    return max(math.ceil((limit - start) / delta), 0)


def _range_shape(ctx: ShapeContext) -> Any:
    start, limit, delta, dtype = (ctx.attr(k) for k in ("start", "limit", "delta", "dtype"))
    if delta == 0:
        raise ctx.error("is 0", attr="delta", hint="give a non-zero step")
    if dtype not in NUMERIC:
        raise ctx.error(f"{dtype} is not numeric", attr="dtype",
                        hint="give a numeric dtype (a float or integer type)")
    if to_numpy_dtype(dtype).kind in "iu" and not all(float(v).is_integer()
                                                      for v in (start, limit, delta)):
        raise ctx.error(f"start/limit/delta {start}, {limit}, {delta} are not integers",
                        attr="dtype", hint="an integer Range needs integer bounds")
    return (range_len(start, limit, delta),), dtype


def range_values(start: float, limit: float, delta: float, dtype: str) -> np.ndarray:
    """start + i * delta for i < range_len, computed in ``dtype``."""
    n, dt = range_len(start, limit, delta), to_numpy_dtype(dtype)
    if dt.kind in "iu":
        return (int(start) + int(delta) * np.arange(n, dtype=np.int64)).astype(dt)
    return (np.array(start, dt) + np.arange(n).astype(dt) * np.array(delta, dt)).astype(dt)


(
    define_op("Range")
    .doc("start, start + delta, ... while below `limit` (above, for a negative delta).")
    .output("y", "T")
    .param("start", "float").param("limit", "float").param("delta", "float")
    .param("dtype", "dtype", doc="the element type of ONNX's inputs")
    .type_param("T", NUMERIC)
    .shape_fn(_range_shape)
    .compute(range_values)
)


# -- EyeLike -------------------------------------------------------------------------------
def _eyelike_shape(ctx: ShapeContext) -> Any:
    if ctx.input_rank(0) != 2:
        raise ctx.error(f"input has rank {ctx.input_rank(0)}; EyeLike needs rank 2",
                        hint="EyeLike takes a 2-D input: check the input's shape")
    return ctx.input_shape(0), ctx.attr("dtype") or ctx.input_dtype(0)


def _eyelike(x: np.ndarray, k: int, dtype: str | None) -> np.ndarray:
    """Ones on diagonal ``k`` of a matrix shaped like the 2-D ``x`` (rank checked by the shape
    function), in ``dtype`` or, when absent, x's dtype."""
    rows, cols = x.shape
    return np.eye(rows, cols, k=k, dtype=to_numpy_dtype(dtype) if dtype else x.dtype)


(
    define_op("EyeLike")
    .doc("Ones on diagonal k of a 2-D tensor shaped like x, zeros elsewhere.")
    .input("x", "T").output("y", "U")
    .param("k", "int", 0)
    .param("dtype", "dtype", None, doc="absent (None): x's dtype")
    .type_param("T", ALL).type_param("U", ALL)
    .shape_fn(_eyelike_shape)
    .compute(_eyelike)
)


# -- OneHot --------------------------------------------------------------------------------
def _onehot_shape(ctx: ShapeContext) -> Any:
    shape, values = ctx.input_shape(0), ctx.attr("values")
    if values.size != 2:
        raise ctx.error(f"has {values.size} elements; it needs [off_value, on_value]",
                        attr="values",
                        hint="give values as [off_value, on_value]")
    r = len(shape) + 1
    axis = ctx.normalize_axis(ctx.attr("axis"), r)
    return shape[:axis] + (ctx.attr("depth"),) + shape[axis:], from_numpy_dtype(values.dtype)


def _onehot(indices: np.ndarray, depth: int, values: np.ndarray, axis: int) -> np.ndarray:
    idx = indices.astype(np.int64)
    idx = np.where(idx < 0, idx + depth, idx)  # out-of-range indices give an all-off row
    axis %= idx.ndim + 1
    hot = np.expand_dims(idx, axis) == np.arange(depth).reshape(
        (depth,) + (1,) * (idx.ndim - axis))
    flat = values.reshape(-1)
    return np.where(hot, flat[1], flat[0]).astype(values.dtype)


(
    define_op("OneHot")
    .doc("A new `axis` of size `depth` holding on_value at each index and off_value elsewhere.")
    .input("indices", "T").output("y", "U")
    .param("depth", "int", minimum=1, doc="ONNX's depth input")
    .param("values", "tensor", doc="[off_value, on_value] (ONNX's values input); sets the dtype")
    .param("axis", "int", -1)
    .type_param("T", NUMERIC).type_param("U", ALL)
    .shape_fn(_onehot_shape)
    .compute(_onehot)
)


# -- Trilu ---------------------------------------------------------------------------------
def _trilu_shape(ctx: ShapeContext) -> Any:
    if ctx.input_rank(0) < 2:
        raise ctx.error(f"input has rank {ctx.input_rank(0)}; Trilu needs rank >= 2",
                        hint="Trilu takes a (..., rows, columns) input: check the input's shape")
    return ctx.same_as_input(0)


(
    define_op("Trilu")
    .doc("Keep the upper (or lower) triangle of the last two dims from diagonal k; zero the rest.")
    .input("x", "T").output("y", "T")
    .param("upper", "int", 1, allowed=(0, 1))
    .param("k", "int", 0, doc="diagonal offset (ONNX's optional second input)")
    .type_param("T", ALL)
    .shape_fn(_trilu_shape)
    .compute(lambda x, upper, k: np.triu(x, k) if upper else np.tril(x, k))
)


