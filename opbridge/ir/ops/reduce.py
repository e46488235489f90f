"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax, ArgMin,
CumSum, TopK.

``axes`` (ReduceX), ``axis`` (CumSum) and ``k`` (TopK) are attributes here even where ONNX
takes them as inputs: IR graphs are static, the mappers read the constants.
Reduce ``axes=()`` means every axis, unless ``noop_with_empty_axes=1``: then nothing is
reduced and only the elementwise part applies (|x| for L1, x^2 for SumSquare, ...), as in
the onnx reference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op
from .common import ALL, FLOATS, NUMERIC


def _reduce_axes(ctx: ShapeContext) -> tuple[int, ...]:
    rank = ctx.input_rank(0)
    axes = [ctx.normalize_axis(a, rank, "axes") for a in ctx.attr("axes")]
    if len(set(axes)) != len(axes):
        raise ctx.error(f"= {list(ctx.attr('axes'))}: an axis appears twice", attr="axes",
                        hint="name each axis once")
    if not axes:
        return () if ctx.attr("noop_with_empty_axes") else tuple(range(rank))
    return tuple(sorted(axes))


def _reduce_shape(ctx: ShapeContext) -> Any:
    xs = ctx.input_shape(0)
    axes = _reduce_axes(ctx)
    if ctx.attr("keepdims"):
        out = tuple(1 if i in axes else d for i, d in enumerate(xs))
    else:
        out = tuple(d for i, d in enumerate(xs) if i not in axes)
    return out, ctx.input_dtype(0)


def _axes_of(x: np.ndarray, axes: tuple[int, ...], noop: int) -> tuple[int, ...]:
    if not axes:
        return () if noop else tuple(range(x.ndim))
    return tuple(sorted(a % x.ndim for a in axes))


def _wdt(x: np.ndarray) -> np.dtype:
    if x.dtype.kind in "iub":
        return np.dtype(np.float64) if x.dtype.itemsize >= 4 else np.dtype(np.float32)
    return np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)


def _empty_fill(x: np.ndarray, value: float) -> Any:
    """``initial`` for max/min-like reductions over a zero-size tensor (onnx reference values)."""
    if x.size:
        return np._NoValue  # type: ignore[attr-defined]
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        return info.min if value < 0 else info.max
    if x.dtype.kind == "b":
        return value > 0
    return value


def _lse(x: np.ndarray, ax: tuple[int, ...], keep: bool) -> np.ndarray:
    xw = x.astype(_wdt(x), copy=False)
    if xw.size == 0:
        return np.log(np.sum(np.exp(xw), axis=ax, keepdims=keep))
    m = np.max(xw, axis=ax, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(xw - m), axis=ax, keepdims=True)) + m
    return out if keep else np.squeeze(out, axis=ax)


_Kernel = Callable[[np.ndarray, tuple[int, ...], bool], Any]
_REDUCERS: dict[str, tuple[_Kernel, tuple[str, ...], str]] = {
    "ReduceSum": (lambda x, ax, k: np.sum(x, axis=ax, keepdims=k), NUMERIC, "sum"),
    "ReduceMean": (lambda x, ax, k: np.mean(x.astype(_wdt(x), copy=False), axis=ax, keepdims=k),
                   NUMERIC, "mean"),
    "ReduceMax": (lambda x, ax, k: np.max(x, axis=ax, keepdims=k, initial=_empty_fill(x, -np.inf)),
                  ALL, "max"),
    "ReduceMin": (lambda x, ax, k: np.min(x, axis=ax, keepdims=k, initial=_empty_fill(x, np.inf)),
                  ALL, "min"),
    "ReduceProd": (lambda x, ax, k: np.prod(x, axis=ax, keepdims=k), NUMERIC, "product"),
    "ReduceL1": (lambda x, ax, k: np.sum(np.abs(x), axis=ax, keepdims=k), NUMERIC, "sum of |x|"),
    "ReduceL2": (lambda x, ax, k: np.sqrt(np.sum(np.square(x.astype(_wdt(x), copy=False)), axis=ax,
                                                 keepdims=k)), NUMERIC, "sqrt(sum of x^2)"),
    "ReduceLogSum": (lambda x, ax, k: np.log(np.sum(x.astype(_wdt(x), copy=False), axis=ax,
                                                    keepdims=k)), FLOATS, "log(sum)"),
    "ReduceLogSumExp": (_lse, FLOATS, "log(sum(exp(x))), computed stably"),
    "ReduceSumSquare": (lambda x, ax, k: np.sum(np.square(x), axis=ax, keepdims=k), NUMERIC,
                        "sum of x^2"),
}


def _make_reduce(fn: _Kernel) -> Callable[..., np.ndarray]:
    def compute(x: np.ndarray, *, axes: tuple[int, ...], keepdims: int,
                noop_with_empty_axes: int) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            res = fn(x, _axes_of(x, axes, noop_with_empty_axes), bool(keepdims))
        return np.asarray(res).astype(x.dtype, copy=False)

    return compute


for _name, (_fn, _types, _what) in _REDUCERS.items():
    (
        define_op(_name)
        .doc(f"{_what} over `axes` (empty = all axes unless noop_with_empty_axes)")
        .input("data", "T").output("reduced", "T")
        .param("axes", "ints", default=(), doc="axes to reduce; () = all")
        .param("keepdims", "int", default=1, allowed=(0, 1), doc="keep reduced axes as size 1")
        .param("noop_with_empty_axes", "int", default=0, allowed=(0, 1),
               doc="with axes=(): reduce nothing instead of everything")
        .type_param("T", _types)
        .shape_fn(_reduce_shape)
        .compute(_make_reduce(_fn))
    )


# -- ArgMax / ArgMin -----------------------------------------------------------------------
def _arg_shape(ctx: ShapeContext) -> Any:
    xs = ctx.input_shape(0)
    axis = ctx.normalize_axis(ctx.attr("axis"), len(xs))
    if isinstance(xs[axis], int) and xs[axis] == 0:
        raise ctx.error(f"axis {axis} has size 0; there is no index to return", attr="axis",
                        hint="ArgMax/ArgMin need a non-empty axis: check the input's shape (--input-shape)")
    out = list(xs)
    if ctx.attr("keepdims"):
        out[axis] = 1
    else:
        out.pop(axis)
    return tuple(out), "i64"


def _make_arg(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def compute(x: np.ndarray, *, axis: int, keepdims: int, select_last_index: int) -> np.ndarray:
        ax = axis % x.ndim
        if select_last_index:
            idx = x.shape[ax] - 1 - fn(np.flip(x, axis=ax), axis=ax)
        else:
            idx = fn(x, axis=ax)
        if keepdims:
            idx = np.expand_dims(idx, ax)
        return idx.astype(np.int64)

    return compute


for _name, _fn2, _what in (("ArgMax", np.argmax, "largest"), ("ArgMin", np.argmin, "smallest")):
    (
        define_op(_name)
        .doc(f"index (i64) of the {_what} element along `axis`; the first one, or the last "
             "with select_last_index")
        .input("data", "T").output("reduced", "i64")
        .param("axis", "int", default=0)
        .param("keepdims", "int", default=1, allowed=(0, 1))
        .param("select_last_index", "int", default=0, allowed=(0, 1))
        .type_param("T", NUMERIC)
        .shape_fn(_arg_shape)
        .compute(_make_arg(_fn2))
    )


# -- CumSum ----------------------------------------------------------------------------------
def _cumsum_shape(ctx: ShapeContext) -> Any:
    ctx.normalize_axis(ctx.attr("axis"), ctx.input_rank(0))
    return ctx.same_as_input(0)


def _cumsum(x: np.ndarray, *, axis: int, exclusive: int, reverse: int) -> np.ndarray:
    ax = axis % x.ndim
    y = np.flip(x, ax) if reverse else x
    c = np.cumsum(y, axis=ax, dtype=x.dtype)
    if exclusive:
        c = np.concatenate([np.zeros_like(np.take(c, [0], axis=ax)),
                            np.take(c, np.arange(c.shape[ax] - 1), axis=ax)], axis=ax)
    return np.flip(c, ax) if reverse else c


(
    define_op("CumSum")
    .doc("cumulative sum along `axis` (an attribute here; ONNX's axis input is read by the "
         "mapper); exclusive leaves out the element itself, reverse runs from the end")
    .input("x", "T").output("y", "T")
    .param("axis", "int")
    .param("exclusive", "int", default=0, allowed=(0, 1))
    .param("reverse", "int", default=0, allowed=(0, 1))
    .type_param("T", NUMERIC)
    .shape_fn(_cumsum_shape)
    .compute(_cumsum)
)


# -- TopK --------------------------------------------------------------------------------------
def _topk_shape(ctx: ShapeContext) -> Any:
    xs = ctx.input_shape(0)
    axis = ctx.normalize_axis(ctx.attr("axis"), len(xs))
    k = ctx.attr("k")
    if isinstance(xs[axis], int) and k > xs[axis]:
        raise ctx.error(f"= {k} is larger than axis {axis} ({xs[axis]} elements)", attr="k",
                        hint="k must be at most the axis size: check k and the input's shape "
                             "(--input-shape)")
    out = list(xs)
    out[axis] = k
    return [(tuple(out), ctx.input_dtype(0)), (tuple(out), "i64")]


def _topk(x: np.ndarray, *, k: int, axis: int, largest: int, sorted: int) -> Any:
    ax = axis % x.ndim
    n = x.shape[ax]
    if largest:
        # stable sort of the reversed axis: equal values keep the lower original index first
        order = np.argsort(np.flip(x, ax), axis=ax, kind="stable")
        idx = n - 1 - np.flip(np.take(order, np.arange(n - k, n), axis=ax), ax)
    else:
        idx = np.take(np.argsort(x, axis=ax, kind="stable"), np.arange(k), axis=ax)
    idx = idx.astype(np.int64)
    return np.take_along_axis(x, idx, axis=ax), idx


(
    define_op("TopK")
    .doc("the k largest (or smallest) elements along `axis`, sorted, and their i64 indices; "
         "ties keep the lower index first. k is an attribute here")
    .input("X", "T").output("Values", "T").output("Indices", "i64")
    .param("k", "int", minimum=0)
    .param("axis", "int", default=-1)
    .param("largest", "int", default=1, allowed=(0, 1))
    .param("sorted", "int", default=1, allowed=(0, 1),
           doc="ONNX leaves the order unspecified when 0; the IR always sorts")
    .type_param("T", NUMERIC)
    .shape_fn(_topk_shape)
    .compute(_topk)
)
