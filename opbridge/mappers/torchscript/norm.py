"""Normalisations: batch, layer, group and instance norm (inference), and ``aten::normalize``-style
vector norms."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ir.graph import Value
from ...ir.types import to_numpy_dtype
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, norm_axis, static_shape, ts_mapping


def _param(a: Args, i: int, n: int, fill: float, like: Value) -> Value:
    """Optional per-channel parameter ``i``; absent (None) -> a constant filled with ``fill``."""
    if a.is_none(i):
        return a.g.constant(np.full((n,), fill, dtype=to_numpy_dtype(like.dtype)))
    return a.tensor(i)


@ts_mapping("batch_norm", "_native_batch_norm_legit_no_training")
def batch_norm(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    c = int(static_shape(g, x)[1])
    if node.op_type == "batch_norm":
        # (input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled)
        if a.py(5):
            raise g.unsupported("batch_norm with training=True", hint="export the module in eval()")
        eps = float(a.py(7, 1e-5))
    else:  # (input, weight, bias, running_mean, running_var, momentum, eps)
        eps = float(a.py(6, 1e-5))
    if a.is_none(3) or a.is_none(4):
        raise g.unsupported("batch_norm without running statistics (track_running_stats=False)",
                            hint="use InstanceNorm, or keep running statistics")
    y = g.op("BatchNormalization", [x, _param(a, 1, c, 1.0, x), _param(a, 2, c, 0.0, x),
                                    a.tensor(3), a.tensor(4)], epsilon=eps)
    return y if len(node.outputs) == 1 else (y, None, None)


@ts_mapping("layer_norm", "native_layer_norm")
def layer_norm(node: OriginNode, g: MapContext) -> Any:
    # (input, normalized_shape, weight, bias, eps[, cudnn_enable])
    a = Args(node, g)
    x = a.tensor(0)
    shape = a.ints(1)
    n = int(np.prod(shape))
    scale = _param(a, 2, n, 1.0, x)
    bias = _param(a, 3, n, 0.0, x)
    if len(shape) > 1:
        scale = g.op("Reshape", [scale], shape=shape)
        bias = g.op("Reshape", [bias], shape=shape)
    y = g.op("LayerNormalization", [x, scale, bias], num_outputs=1, axis=-len(shape), epsilon=float(a.py(4, 1e-5)))
    return y if len(node.outputs) == 1 else (y, None, None)


@ts_mapping("group_norm")
def group_norm(node: OriginNode, g: MapContext) -> Any:
    # (input, num_groups, weight, bias, eps, cudnn_enabled)
    a = Args(node, g)
    x = a.tensor(0)
    c = int(static_shape(g, x)[1])
    return g.op("GroupNormalization", [x, _param(a, 2, c, 1.0, x), _param(a, 3, c, 0.0, x)],
                num_groups=a.int(1), epsilon=float(a.py(4, 1e-5)))


@ts_mapping("instance_norm")
def instance_norm(node: OriginNode, g: MapContext) -> Any:
    # (input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn)
    a = Args(node, g)
    x = a.tensor(0)
    c = int(static_shape(g, x)[1])
    eps = float(a.py(7, 1e-5))
    if not a.py(5, True):  # track_running_stats=True in eval: a batch norm with those stats
        return g.op("BatchNormalization", [x, _param(a, 1, c, 1.0, x), _param(a, 2, c, 0.0, x),
                                        a.tensor(3), a.tensor(4)], epsilon=eps)
    return g.op("InstanceNormalization", [x, _param(a, 1, c, 1.0, x), _param(a, 2, c, 0.0, x)],
                epsilon=eps)


@ts_mapping("linalg_vector_norm", "norm", "frobenius_norm")
def vector_norm(node: OriginNode, g: MapContext) -> Any:
    # linalg_vector_norm(self, ord, dim, keepdim, dtype); norm(self, p, dim, keepdim[, dtype])
    a = Args(node, g)
    x = a.tensor(0)
    rank = len(x.shape)
    if node.op_type == "frobenius_norm":
        p, dims, keep = 2.0, a.ints(1), bool(a.py(2, False))
    else:
        p = 2.0 if a.is_none(1) else float(a.py(1))
        dims, keep = a.ints(2), bool(a.py(3, False))
    axes = list(range(rank)) if not dims else [norm_axis(g, d, rank) for d in dims]
    return _p_norm(g, x, p, axes, keep)


def _p_norm(g: MapContext, x: Value, p: float, axes: list[int], keep: bool) -> Value:
    """torch.linalg.vector_norm's orders: 1, 2, ±inf (max/min of |x|), 0 (the number of
    non-zero entries) and any other p: (sum |x|^p)^(1/p)."""
    ops = {1.0: "ReduceL1", 2.0: "ReduceL2"}
    if p in ops:
        return g.op(ops[p], [x], axes=axes, keepdims=int(keep))
    if math.isinf(p):
        return g.op("ReduceMax" if p > 0 else "ReduceMin", [g.op("Abs", [x])], axes=axes, keepdims=int(keep))
    if p == 0:
        zero = g.constant(np.zeros((), to_numpy_dtype(x.dtype)))
        nonzero = g.op("Cast", [g.op("Not", [g.op("Equal", [x, zero])])], to=x.dtype)
        return g.op("ReduceSum", [nonzero], axes=axes, keepdims=int(keep))
    np_dtype = to_numpy_dtype(x.dtype)
    powered = g.op("Pow", [g.op("Abs", [x]), g.constant(np.asarray(p, np_dtype))])
    total = g.op("ReduceSum", [powered], axes=axes, keepdims=int(keep))
    return g.op("Pow", [total, g.constant(np.asarray(1.0 / p, np_dtype))])


@ts_mapping("cosine_similarity")
def cosine_similarity(node: OriginNode, g: MapContext) -> Any:
    """(x1, x2, dim=1, eps=1e-8): sum(x1·x2) / sqrt(max(sum(x1²)·sum(x2²), eps²)), as torch
    computes it (aten/src/ATen/native/Distance.cpp), the inputs broadcast together."""
    a = Args(node, g)
    x1, x2 = a.tensor(0), a.tensor(1)
    rank = max(len(x1.shape), len(x2.shape))
    axes = [norm_axis(g, a.int(2, 1, what="dim"), rank)]
    eps = float(a.py(3, 1e-8))
    np_dtype = to_numpy_dtype(x1.dtype)

    def sum_of(u: Value, v: Value) -> Value:
        return g.op("ReduceSum", [g.op("Mul", [u, v])], axes=axes, keepdims=0)

    # the operands broadcast to one shape first, so that every sum runs over the same entries
    try:
        shape = list(np.broadcast_shapes(static_shape(g, x1), static_shape(g, x2)))
    except ValueError:
        raise g.error(f"x1 {x1.shape} and x2 {x2.shape} do not broadcast together") from None
    x1, x2 = (v if list(v.shape) == shape else g.op("Expand", [v], shape=shape) for v in (x1, x2))
    denom = g.op("Max", [g.op("Mul", [sum_of(x1, x1), sum_of(x2, x2)]), g.constant(np.asarray(eps * eps, np_dtype))])
    return g.op("Div", [sum_of(x1, x2), g.op("Sqrt", [denom])])


@ts_mapping("rms_norm")
def rms_norm(node: OriginNode, g: MapContext) -> Any:
    """``x / sqrt(mean(x², normalized dims) + eps) * weight``; eps None is the dtype's epsilon,
    as torch.nn.functional.rms_norm takes it."""
    # (input, normalized_shape, weight?, eps?)
    a = Args(node, g)
    x = a.tensor(0)
    shape = a.ints(1)
    np_dtype = to_numpy_dtype(x.dtype)
    eps = a.py(3) if not a.is_none(3) else float(np.finfo(np_dtype).eps)
    axes = list(range(len(x.shape) - len(shape), len(x.shape)))
    ms = g.op("ReduceMean", [g.op("Mul", [x, x])], axes=axes, keepdims=1)
    inv = g.op("Reciprocal", [g.op("Sqrt", [g.op("Add", [ms, g.constant(np.asarray(eps, np_dtype))])])])
    y = g.op("Mul", [x, inv])
    return y if a.is_none(2) else g.op("Mul", [y, a.tensor(2)])
