"""Activations and softmax: ``aten::relu`` … ``aten::mish``, ``aten::softmax``, ``aten::log_softmax``.

In-place variants (``relu_``) are registered too: in a frozen inference graph they compute
the same value (nn.ReLU(inplace=True) traces as ``aten::relu_``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, cast, ir_dtype, norm_axis, one_to_one, ts_mapping, with_inplace
from .elementwise import operands

for _kind, _ir_op in (("relu", "Relu"), ("hardswish", "HardSwish"), ("mish", "Mish"), ("silu", "Swish"), ("selu", "Selu")):
    one_to_one(_ir_op, *with_inplace(_kind))


@ts_mapping(*with_inplace("relu6"))
def relu6(node: OriginNode, g: MapContext) -> Any:
    return g.op("Clip", [Args(node, g).tensor(0)], min=0.0, max=6.0)


@ts_mapping(*with_inplace("hardtanh"))
def hardtanh(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return g.op("Clip", [a.tensor(0)], min=float(a.py(1, -1.0)), max=float(a.py(2, 1.0)))


def _bound(a: Args, i: int, inf: float) -> float:
    return inf if a.is_none(i) else float(np.asarray(a.py(i)).reshape(()))


def _scalar_bounds(a: Args, idx: tuple[int, ...]) -> bool:
    """True when every given bound is one number (a Clip attribute); a tensor bound (the
    ``clamp.Tensor`` overload: per-element, broadcast) is an elementwise Max/Min instead."""
    return all(a.is_none(i) or (a.known(i) and np.size(a.py(i)) == 1) for i in idx)


def _clamp(a: Args, lo: int | None, hi: int | None) -> Value:
    """min(max(x, lo), hi), as torch.clamp (hi wins where lo > hi)."""
    idx = tuple(i for i in (lo, hi) if i is not None)
    if _scalar_bounds(a, idx):
        return a.g.op("Clip", [a.tensor(0)],
                      min=-math.inf if lo is None else _bound(a, lo, -math.inf),
                      max=math.inf if hi is None else _bound(a, hi, math.inf))
    y = a.tensor(0)
    for i, op in ((lo, "Max"), (hi, "Min")):
        if i is not None and not a.is_none(i):
            x, b = operands(a, 0, i)
            y = a.g.op(op, [cast(a.g, y, x.dtype), b])
    return y


@ts_mapping(*with_inplace("clamp", "clip"))
def clamp(node: OriginNode, g: MapContext) -> Any:
    return _clamp(Args(node, g), 1, 2)


@ts_mapping(*with_inplace("clamp_min"))
def clamp_min(node: OriginNode, g: MapContext) -> Any:
    return _clamp(Args(node, g), 1, None)


@ts_mapping(*with_inplace("clamp_max"))
def clamp_max(node: OriginNode, g: MapContext) -> Any:
    return _clamp(Args(node, g), None, 1)


@ts_mapping("gelu", "gelu_")
def gelu(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    approx = a.py(1, "none")
    if approx not in ("none", "tanh"):
        raise g.error(f"approximate = {approx!r}: must be 'none' or 'tanh'", attr="approximate")
    return g.op("Gelu", [a.tensor(0)], approximate=approx)


@ts_mapping(*with_inplace("hardsigmoid"))
def hardsigmoid(node: OriginNode, g: MapContext) -> Any:
    # torch: relu6(x + 3) / 6
    return g.op("HardSigmoid", [Args(node, g).tensor(0)], alpha=1.0 / 6.0, beta=0.5)


@ts_mapping(*with_inplace("leaky_relu"))
def leaky_relu(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return g.op("LeakyRelu", [a.tensor(0)], alpha=float(a.py(1, 0.01)))


@ts_mapping(*with_inplace("elu"))
def elu(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    alpha, scale, in_scale = float(a.py(1, 1.0)), float(a.py(2, 1.0)), float(a.py(3, 1.0))
    x = a.tensor(0)
    if in_scale != 1.0:
        x = g.op("Mul", [x, a.scalar_value(in_scale, like=x)])
    y = g.op("Elu", [x], alpha=alpha)
    return y if scale == 1.0 else g.op("Mul", [y, a.scalar_value(scale, like=y)])


@ts_mapping(*with_inplace("celu"))
def celu(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return g.op("Celu", [a.tensor(0)], alpha=float(a.py(1, 1.0)))


@ts_mapping("softplus")
def softplus(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    beta, threshold = float(a.py(1, 1.0)), float(a.py(2, 20.0))
    bx = x if beta == 1.0 else g.op("Mul", [x, a.scalar_value(beta, like=x)])
    y = g.op("Softplus", [bx])
    if beta != 1.0:
        y = g.op("Div", [y, a.scalar_value(beta, like=y)])
    # torch returns x itself where beta * x > threshold
    return g.op("Where", [g.op("Greater", [bx, a.scalar_value(threshold, like=x)]), x, y])


@ts_mapping("log_sigmoid")
def log_sigmoid(node: OriginNode, g: MapContext) -> Any:
    x = Args(node, g).tensor(0)
    return g.op("Neg", [g.op("Softplus", [g.op("Neg", [x])])])


@ts_mapping("prelu")
def prelu(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x, w = a.tensor(0), a.tensor(1)
    rank = len(x.shape)
    if len(w.shape) == 1 and rank >= 2 and w.shape[0] != 1:
        # the weight is per channel (dim 1): shape it (C, 1, ..., 1) to broadcast
        w = g.op("Reshape", [w], shape=[w.shape[0]] + [1] * (rank - 2))
    return g.op("PRelu", [x, w])


@ts_mapping(*with_inplace("threshold"))
def threshold(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    th, val = a.scalar_value(a.py(1), like=x), a.scalar_value(a.py(2), like=x)
    return g.op("Where", [g.op("Greater", [x, th]), x, val])


@ts_mapping("glu")
def glu(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    axis = norm_axis(g, a.int(1, -1), len(x.shape))
    half = int(x.shape[axis]) // 2
    p, q = g.op("Split", [x], axis=axis, split=[half, half])
    return g.op("Mul", [p, g.op("Sigmoid", [q])])


@ts_mapping("softmax", "log_softmax", "_softmax", "_log_softmax")
def softmax(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    axis = norm_axis(g, a.int(1), len(x.shape))
    if not node.op_type.startswith("_") and not a.is_none(2):  # _softmax has no dtype argument
        x = cast(g, x, ir_dtype(g, a.py(2)))
    return g.op("LogSoftmax" if "log" in node.op_type else "Softmax", [x], axis=axis)
