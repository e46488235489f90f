"""Normalisations: BatchNormalization (inference), LayerNormalization, InstanceNormalization,
GroupNormalization (ONNX-21: scale and bias per channel), LRN, LpNormalization,
MeanVarianceNormalization.

Statistics are computed in f32 (f64 for f64 inputs), as ONNX's default ``stash_type=1``;
``stash_type`` itself is therefore not an IR attribute.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op
from .common import FLOATS


def _wdt(x: np.ndarray) -> np.dtype:
    return np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)


def _per_channel(ctx: ShapeContext, first: int, names: tuple[str, ...]) -> None:
    """Inputs ``first..`` (those present) must be 1-D of X's channel count."""
    xs = ctx.input_shape(0)
    if len(xs) < 2:
        raise ctx.error(f"input X has rank {len(xs)}; it needs at least N and C",
                        hint="check the input's shape (--input-shape) and the layer before: this op "
                             "normalises (N, C, ...) tensors")
    c = xs[1]
    for i, name in enumerate(names, start=first):
        if ctx.has_input(i) and tuple(ctx.input_shape(i)) != (c,):
            raise ctx.error(
                f"input '{name}' has shape {list(ctx.input_shape(i))}; it must be [{c}] "
                "(one per channel of X)"
            ,
                hint="scale, bias, mean and var hold one value per channel of X: check the weights, and the "
                     "input's channels (--input-shape)")


def _channel_view(a: np.ndarray, ndim: int, wdt: np.dtype) -> np.ndarray:
    return a.astype(wdt, copy=False).reshape((1, -1) + (1,) * (ndim - 2))


# -- BatchNormalization -----------------------------------------------------------------
def _bn_shape(ctx: ShapeContext) -> Any:
    _per_channel(ctx, 1, ("scale", "B", "input_mean", "input_var"))
    return ctx.same_as_input(0)


def _batchnorm(x: np.ndarray, scale: np.ndarray, b: np.ndarray, mean: np.ndarray,
               var: np.ndarray, *, epsilon: float) -> np.ndarray:
    wdt = _wdt(x)
    # folded into one multiply-add: y = x * a + c
    a = scale.astype(wdt) / np.sqrt(var.astype(wdt) + wdt.type(epsilon))
    c = b.astype(wdt) - mean.astype(wdt) * a
    y = x.astype(wdt, copy=False) * _channel_view(a, x.ndim, wdt)
    y += _channel_view(c, x.ndim, wdt)
    return y.astype(x.dtype, copy=False)


(
    define_op("BatchNormalization")
    .doc("inference batch norm: (x - mean) / sqrt(var + epsilon) * scale + B, per channel "
         "(axis 1); training mode is not part of the IR")
    .input("X", "T").input("scale", "T").input("B", "T").input("input_mean", "T")
    .input("input_var", "T").output("Y", "T")
    .param("epsilon", "float", default=1e-5, minimum=0.0)
    .type_param("T", FLOATS)
    .shape_fn(_bn_shape)
    .compute(_batchnorm)
)


# -- LayerNormalization -----------------------------------------------------------------
def _ln_shape(ctx: ShapeContext) -> Any:
    xs = ctx.input_shape(0)
    axis = ctx.normalize_axis(ctx.attr("axis"), len(xs))
    tail = tuple(xs[axis:])
    for i, name in ((1, "Scale"), (2, "B")):
        if not ctx.has_input(i):
            continue
        s = tuple(ctx.input_shape(i))
        if len(s) > len(tail) or any(a not in (1, b) for a, b in zip(s[::-1], tail[::-1])):
            raise ctx.error(
                f"input '{name}' has shape {list(s)}; it must broadcast to X's normalised "
                f"dims {list(tail)} (axis {ctx.attr('axis')})"
            ,
                hint="scale and bias must broadcast to the normalised dims: check the weights and the axis "
                     "attribute")
    res = [ctx.same_as_input(0)]
    if ctx.attr("output_stats"):
        stat = (tuple(xs[:axis]) + (1,) * len(tail), "f32")
        res += [stat, stat]
    return res


def _layernorm(x: np.ndarray, scale: np.ndarray, b: np.ndarray | None = None, *, axis: int,
               epsilon: float, output_stats: bool) -> Any:
    wdt = _wdt(x)
    axes = tuple(range(axis % x.ndim, x.ndim))
    xw = x.astype(wdt, copy=False)
    mean = np.mean(xw, axis=axes, keepdims=True)
    d = xw - mean
    inv = 1.0 / np.sqrt(np.mean(d * d, axis=axes, keepdims=True) + wdt.type(epsilon))
    y = d * inv * scale.astype(wdt, copy=False)
    if b is not None:
        y = y + b.astype(wdt, copy=False)
    y = y.astype(x.dtype, copy=False)
    if output_stats:
        return y, mean.astype(np.float32), inv.astype(np.float32)
    return y


(
    define_op("LayerNormalization")
    .doc("normalise over axes [axis, rank): (x - mean) / sqrt(var + epsilon) * Scale + B; "
         "optional outputs Mean and InvStdDev (f32) when output_stats")
    .input("X", "T").input("Scale", "T").input("B", "T", optional=True)
    .output("Y", "T").output("Mean", "f32", optional=True).output("InvStdDev", "f32", optional=True)
    .param("axis", "int", default=-1, doc="first normalised axis")
    .param("epsilon", "float", default=1e-5, minimum=0.0)
    .param("output_stats", "bool", default=False,
           doc="whether the node has the Mean and InvStdDev outputs")
    .type_param("T", FLOATS)
    .shape_fn(_ln_shape)
    .compute(_layernorm)
)


# -- InstanceNormalization / GroupNormalization -------------------------------------------
def _in_shape(ctx: ShapeContext) -> Any:
    _per_channel(ctx, 1, ("scale", "B"))
    if len(ctx.input_shape(0)) < 3:
        raise ctx.error(f"input X has rank {len(ctx.input_shape(0))}; it needs N, C and spatial axes",
                        hint="check the input's shape (--input-shape) and the layer before: this op "
                             "normalises (N, C, spatial...) tensors")
    return ctx.same_as_input(0)


def _group_norm_core(x: np.ndarray, groups: int, scale: np.ndarray, b: np.ndarray,
                     epsilon: float) -> np.ndarray:
    wdt = _wdt(x)
    n, c = x.shape[:2]
    xg = x.astype(wdt, copy=False).reshape(n, groups, -1)
    mean = xg.mean(axis=2, keepdims=True)
    d = xg - mean
    var = np.mean(d * d, axis=2, keepdims=True)
    y = (d / np.sqrt(var + wdt.type(epsilon))).reshape(x.shape)
    y = y * _channel_view(scale, x.ndim, wdt) + _channel_view(b, x.ndim, wdt)
    return y.astype(x.dtype, copy=False)


(
    define_op("InstanceNormalization")
    .doc("normalise each (n, c) plane over its spatial axes, then scale and B per channel")
    .input("input", "T").input("scale", "T").input("B", "T").output("output", "T")
    .param("epsilon", "float", default=1e-5, minimum=0.0)
    .type_param("T", FLOATS)
    .shape_fn(_in_shape)
    .compute(lambda x, scale, b, *, epsilon: _group_norm_core(x, x.shape[1], scale, b, epsilon))
)


def _gn_shape(ctx: ShapeContext) -> Any:
    _per_channel(ctx, 1, ("scale", "bias"))
    c = ctx.input_shape(0)[1]
    g = ctx.attr("num_groups")
    if isinstance(c, int) and c % g:
        raise ctx.error(f"= {g} does not divide the {c} channels", attr="num_groups",
                        hint="num_groups must divide the channels: check the attribute and the input's "
                             "channels (--input-shape)")
    return ctx.same_as_input(0)


(
    define_op("GroupNormalization")
    .doc("split the channels into num_groups groups, normalise each group over its channels "
         "and spatial axes, then scale and bias per channel (ONNX-21 semantics)")
    .input("X", "T").input("scale", "T").input("bias", "T").output("Y", "T")
    .param("num_groups", "int", minimum=1)
    .param("epsilon", "float", default=1e-5, minimum=0.0)
    .type_param("T", FLOATS)
    .shape_fn(_gn_shape)
    .compute(lambda x, scale, bias, *, num_groups, epsilon:
             _group_norm_core(x, num_groups, scale, bias, epsilon))
)


# -- LRN, LpNormalization, MeanVarianceNormalization ----------------------------------------
def _lrn_shape(ctx: ShapeContext) -> Any:
    if len(ctx.input_shape(0)) < 3:
        raise ctx.error(f"input X has rank {len(ctx.input_shape(0))}; it needs N, C and spatial axes",
                        hint="check the input's shape (--input-shape) and the layer before: this op "
                             "normalises (N, C, spatial...) tensors")
    return ctx.same_as_input(0)


def _lrn(x: np.ndarray, *, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    wdt = _wdt(x)
    sq = np.square(x.astype(wdt, copy=False))
    c = x.shape[1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    # window sums over channels [c - lo, c + hi] by a cumulative sum along axis 1
    cs = np.cumsum(np.pad(sq, [(0, 0), (lo + 1, hi)] + [(0, 0)] * (x.ndim - 2)), axis=1)
    ssum = cs[:, size:size + c] - cs[:, :c]
    y = x / (wdt.type(bias) + wdt.type(alpha / size) * ssum) ** wdt.type(beta)
    return y.astype(x.dtype, copy=False)


(
    define_op("LRN")
    .doc("local response normalisation across channels: x / (bias + alpha/size * sum of x^2 "
         "over `size` neighbouring channels)^beta")
    .input("X", "T").output("Y", "T")
    .param("size", "int", minimum=1, doc="number of channels summed")
    .param("alpha", "float", default=1e-4)
    .param("beta", "float", default=0.75)
    .param("bias", "float", default=1.0)
    .type_param("T", FLOATS)
    .shape_fn(_lrn_shape)
    .compute(_lrn)
)


def _lpn_shape(ctx: ShapeContext) -> Any:
    ctx.normalize_axis(ctx.attr("axis"), ctx.input_rank(0))
    return ctx.same_as_input(0)


def _lpnorm(x: np.ndarray, *, axis: int, p: int) -> np.ndarray:
    wdt = _wdt(x)
    xw = x.astype(wdt, copy=False)
    if p == 1:
        norm = np.sum(np.abs(xw), axis=axis, keepdims=True)
    else:
        norm = np.sqrt(np.sum(xw * xw, axis=axis, keepdims=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        # a zero norm gives 0, not NaN (as the onnx reference)
        return np.where(norm == 0, 0, xw / norm).astype(x.dtype, copy=False)


(
    define_op("LpNormalization")
    .doc("x divided by its L1 (sum of |x|) or L2 norm along one axis; 0 where the norm is 0")
    .input("input", "T").output("output", "T")
    .param("axis", "int", default=-1)
    .param("p", "int", default=2, allowed=(1, 2))
    .type_param("T", FLOATS)
    .shape_fn(_lpn_shape)
    .compute(_lpnorm)
)


def _mvn_shape(ctx: ShapeContext) -> Any:
    rank = ctx.input_rank(0)
    axes = [ctx.normalize_axis(a, rank, "axes") for a in ctx.attr("axes")]
    if len(set(axes)) != len(axes):
        raise ctx.error(f"= {list(ctx.attr('axes'))}: an axis appears twice", attr="axes",
                        hint="name each axis once")
    return ctx.same_as_input(0)


def _mvn(x: np.ndarray, *, axes: tuple[int, ...]) -> np.ndarray:
    wdt = _wdt(x)
    xw = x.astype(wdt, copy=False)
    ax = tuple(a % x.ndim for a in axes)
    mean = np.mean(xw, axis=ax, keepdims=True)
    # the ONNX function body: sqrt(E[x^2] - E[x]^2) + 1e-9
    std = np.sqrt(np.mean(xw * xw, axis=ax, keepdims=True) - mean * mean)
    return ((xw - mean) / (std + wdt.type(1e-9))).astype(x.dtype, copy=False)


(
    define_op("MeanVarianceNormalization")
    .doc("(x - mean) / (std + 1e-9) with mean and std over `axes`")
    .input("X", "T").output("Y", "T")
    .param("axes", "ints", default=(0, 2, 3))
    .type_param("T", FLOATS)
    .shape_fn(_mvn_shape)
    .compute(_mvn)
)
