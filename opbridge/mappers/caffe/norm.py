"""Caffe normalisations: BatchNorm (with its scale-factor blob), Scale, Bias, LRN, MVN,
SSD's Normalize, and Softmax."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..registry import mapping
from .common import Params, norm_axis

CAFFE = Framework.CAFFE


def _f32(g: Any, arr: Any) -> Value:
    return g.constant(np.asarray(arr, dtype=np.float32))


@mapping(CAFFE, "BatchNorm")
def batch_norm(node: OriginNode, g: Any) -> Value:
    """(x - mean) / sqrt(var + eps), where Caffe stores mean * f, var * f and f (blob 2).

    With ``use_global_stats: false`` Caffe normalises with the batch's own statistics.
    """
    p = Params(node, "batch_norm_param")
    x = g.input(0)
    c = int(x.shape[1])
    eps = float(p.get("eps"))
    blobs = (((c,), "mean"), ((c,), "variance"), ((1,), "count"))
    if p.has("use_global_stats") and not p.get("use_global_stats"):
        # unused, but Caffe (and OpenCV) keep them: checked when present, provided when asked
        for i, (shape, kind) in enumerate(blobs):
            if g.has_weight(i):
                g.weight_array(i, shape, kind=kind)
        axes = tuple(i for i in range(len(x.shape)) if i != 1)
        mean = g.op("ReduceMean", [x], axes=axes, keepdims=1)
        d = g.op("Sub", [x, mean])
        var = g.op("ReduceMean", [g.op("Mul", [d, d])], axes=axes, keepdims=1)
        std = g.op("Sqrt", [g.op("Add", [var, _f32(g, eps)])])
        return g.op("Div", [d, std])
    mean, var, count = (g.weight_array(i, shape, kind=kind) for i, (shape, kind) in enumerate(blobs))
    factor = float(count.reshape(-1)[0])
    sf = 0.0 if factor == 0.0 else 1.0 / factor
    ones = np.ones(c, np.float32)
    return g.op("BatchNormalization", [x, _f32(g, ones), _f32(g, np.zeros(c)), _f32(g, mean * sf),
                                       _f32(g, var * sf)], epsilon=eps)


def _param_shape(p: Params, x: Value) -> tuple[int, tuple[int, ...]]:
    rank = len(x.shape)
    axis = norm_axis(p, "axis", int(p.get("axis")), rank) if rank else 0
    num_axes = int(p.get("num_axes"))
    if num_axes < -1 or (num_axes >= 0 and axis + num_axes > rank):
        raise p.error("num_axes", num_axes, f"out of range for axis {axis} of a rank-{rank} input")
    end = rank if num_axes == -1 else axis + num_axes
    return axis, tuple(int(d) for d in x.shape[axis:end])


def _bcast(arr_or_val: Any, g: Any, axis: int, pshape: tuple[int, ...], rank: int) -> Value:
    """A parameter of shape ``pshape`` laid along axes axis.. of a rank-``rank`` tensor."""
    shape = pshape + (1,) * (rank - axis - len(pshape))
    if isinstance(arr_or_val, np.ndarray):
        return _f32(g, arr_or_val.reshape(shape) if pshape else arr_or_val.reshape(()))
    if tuple(arr_or_val.shape) == shape:
        return arr_or_val
    return g.op("Reshape", [arr_or_val], shape=shape)


def _scale_or_bias(node: OriginNode, g: Any, block: str, op: str) -> Value:
    p = Params(node, block)
    x = g.input(0)
    rank = len(x.shape)
    if g.num_inputs > 1:  # the parameter is the second bottom; its rank gives num_axes
        other = g.input(1)
        axis = norm_axis(p, "axis", int(p.get("axis")), rank) if rank else 0
        pshape = tuple(int(d) for d in other.shape)
        if tuple(x.shape[axis:axis + len(pshape)]) != pshape:
            raise g.error(f"bottom 1 has shape {pshape}, not the shape of bottom 0's axes "
                          f"{axis}.. ({tuple(x.shape)})", hint=f"check {block}.axis")
        y = g.op(op, [x, _bcast(other, g, axis, pshape, rank)])
        first_bias = 0
    else:
        axis, pshape = _param_shape(p, x)
        first = g.weight_array(0, pshape, kind="scale" if op == "Mul" else "bias")
        y = g.op(op, [x, _bcast(first, g, axis, pshape, rank)])
        first_bias = 1
    if op == "Mul" and p.get("bias_term"):
        b = g.weight_array(first_bias, pshape, kind="bias")
        y = g.op("Add", [y, _bcast(b, g, axis, pshape, rank)])
    return y


@mapping(CAFFE, "Scale")
def scale(node: OriginNode, g: Any) -> Value:
    """x * s (+ b): s spans axes axis..axis+num_axes (a blob), or is the second bottom."""
    return _scale_or_bias(node, g, "scale_param", "Mul")


@mapping(CAFFE, "Bias")
def bias(node: OriginNode, g: Any) -> Value:
    """x + b: b spans axes axis..axis+num_axes (a blob), or is the second bottom."""
    return _scale_or_bias(node, g, "bias_param", "Add")


@mapping(CAFFE, "LRN")
def lrn(node: OriginNode, g: Any) -> Value:
    """ACROSS_CHANNELS: x / (k + alpha/n * sum over n channels of x^2)^beta (ONNX LRN).
    WITHIN_CHANNEL: x / (1 + alpha * mean over an n x n window of x^2, zero-padded)^beta."""
    p = Params(node, "lrn_param")
    x = g.input(0)
    n = int(p.get("local_size"))
    if n < 1 or n % 2 == 0:
        raise p.error("local_size", n, "must be odd (Caffe requires it)")
    alpha, beta = float(p.get("alpha")), float(p.get("beta"))
    across = p.get("norm_region") == "ACROSS_CHANNELS"
    # A window wider than 2 * extent + 1 sees every element whatever its centre: shrink it to
    # that (alpha scaled to keep alpha / n, or alpha / n^2 for the 2-D mean), so a hostile
    # local_size cannot make a kernel pad by billions.
    extent = int(x.shape[1]) if across else max(int(d) for d in x.shape[2:])
    wide = 2 * extent + 1
    if n > wide:
        alpha *= (wide / n) if across else (wide / n) ** 2
        n = wide
    if across:
        return g.op("LRN", [x], size=n, alpha=alpha, beta=beta, bias=float(p.get("k")))
    pad = (n - 1) // 2
    sq = g.op("Mul", [x, x])
    avg = g.op("AveragePool", [sq], kernel_shape=(n, n), strides=(1, 1), pads=(pad,) * 4,
               count_include_pad=1, ceil_mode=0)
    base = g.op("Add", [g.op("Mul", [avg, _f32(g, alpha)]), _f32(g, 1.0)])
    return g.op("Mul", [x, g.op("Pow", [base, _f32(g, -beta)])])


@mapping(CAFFE, "MVN")
def mvn(node: OriginNode, g: Any) -> Value:
    """x - mean (over H, W, or C, H, W with across_channels), divided by (std + eps)."""
    p = Params(node, "mvn_param")
    x = g.input(0)
    rank = len(x.shape)
    axes = tuple(range(1 if p.get("across_channels") else 2, rank))
    d = g.op("Sub", [x, g.op("ReduceMean", [x], axes=axes, keepdims=1)])
    if not p.get("normalize_variance"):
        return d
    var = g.op("ReduceMean", [g.op("Mul", [d, d])], axes=axes, keepdims=1)
    std = g.op("Add", [g.op("Sqrt", [var]), _f32(g, float(p.get("eps")))])
    return g.op("Div", [d, std])


@mapping(CAFFE, "Normalize")
def normalize(node: OriginNode, g: Any) -> Value:
    """SSD's L2 normalisation: x / sqrt(sum x^2 + eps), over C (per position) or over C, H, W
    (across_spatial), times a learned scale per channel (or one shared)."""
    p = Params(node, "norm_param")
    x = g.input(0)
    rank = len(x.shape)
    axes = tuple(range(1, rank)) if p.get("across_spatial") else (1,)
    ss = g.op("ReduceSumSquare", [x], axes=axes, keepdims=1)
    norm = g.op("Sqrt", [g.op("Add", [ss, _f32(g, float(p.get("eps")))])])
    y = g.op("Div", [x, norm])
    c = int(x.shape[1])
    if p.get("channel_shared"):
        s = g.weight_array(0, (1,), kind="l2_scale").reshape(())
    else:
        s = g.weight_array(0, (c,), kind="l2_scale").reshape((c,) + (1,) * (rank - 2))
    return g.op("Mul", [y, _f32(g, s)])


@mapping(CAFFE, "Softmax")
def softmax(node: OriginNode, g: Any) -> Value:
    """Softmax along one axis (default 1, the channels)."""
    p = Params(node, "softmax_param")
    x = g.input(0)
    axis = norm_axis(p, "axis", int(p.get("axis")), len(x.shape))
    return g.op("Softmax", [x], axis=axis)
