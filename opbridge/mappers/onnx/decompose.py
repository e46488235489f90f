"""Decompositions of ONNX ops into IR primitives (ops the IR has no dedicated op for).

They are ordinary versioned mappings, registered at each ONNX version whose semantics they
implement (the since-versions of ``onnx.defs``); a mapping onto a dedicated IR op would replace
one with ``override=True``. Each follows the ONNX spec:

- DFT-17/20: products with constant cos/sin matrices (zero-padding, onesided, inverse, irfft).
- CumProd-26: running products along an axis (exclusive, reverse), unrolled over that axis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import MapFn, mapping

ONNX = Framework.ONNX


def versions(op_type: str, *since: int) -> Callable[[MapFn], MapFn]:
    """Register the decorated mapping of ``op_type`` at each ONNX version in ``since``."""

    def deco(fn: MapFn) -> MapFn:
        for v in since:
            mapping(ONNX, op_type, since_opset=v)(fn)
        return fn

    return deco

@versions("CumProd", 26)
def cumprod(node: OriginNode, g: MapContext) -> Any:
    """CumProd-26: running products along ``axis`` (exclusive, reverse), unrolled over the axis."""
    x = g.input(0)
    if x is None:
        raise g.error("input x is required")
    axis_data = g.require_const(1, "axis")
    rank = len(x.shape)
    axis = int(np.asarray(axis_data).reshape(-1)[0])
    if not -rank <= axis < rank:
        raise g.error(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    n = g.static_dim(x, axis, "CumProd, unrolled along its axis,")
    if n == 0:
        return g.op("Identity", [x])
    exclusive, reverse = int(node.get_attr("exclusive", 0)), int(node.get_attr("reverse", 0))
    order = list(range(n - 1, -1, -1)) if reverse else list(range(n))
    parts: dict[int, Value] = {}
    running: Value | None = None
    for i in order:
        s = g.op("Slice", [x], starts=[i], ends=[i + 1], axes=[axis])
        if exclusive:
            if running is None:
                shape = list(x.shape)
                shape[axis] = 1
                parts[i] = g.constant(np.ones(shape), dtype=x.dtype)
            else:
                parts[i] = running
            running = s if running is None else g.op("Mul", [running, s])
        else:
            running = s if running is None else g.op("Mul", [running, s])
            parts[i] = running
    pieces = [parts[i] for i in range(n)]
    return pieces[0] if n == 1 else g.op("Concat", pieces, axis=axis)


def _dft_matrices(n_in: int, length: int, bins: int, inverse: bool, real_out: bool) -> tuple[Any, Any]:
    """cos and sin matrices [n_in, bins] of the DFT of ``length`` points (rows past it zero)."""
    rows = np.arange(n_in)[:, None].astype(np.float64)
    cols = np.arange(bins)[None, :].astype(np.float64)
    theta = 2.0 * np.pi * rows * cols / length
    keep = (np.arange(n_in) < (length if not real_out else length // 2 + 1))[:, None]
    cos, sin = np.cos(theta) * keep, np.sin(theta) * keep
    if real_out:  # irfft: bins 1..L/2-1 count twice (their mirror images)
        k = np.arange(n_in)
        w = np.where((k == 0) | ((length % 2 == 0) & (k == length // 2)), 1.0, 2.0)[:, None]
        cos, sin = cos * w, sin * w
    if inverse:
        cos, sin = cos / length, sin / length
    return cos, sin


@versions("DFT", 17, 20)
def dft(node: OriginNode, g: MapContext) -> Any:
    """DFT-17/20 as matrix products with constant cos/sin matrices along the signal axis."""
    x = g.input(0)
    if x is None:
        raise g.error("input is required")
    rank = len(x.shape)
    if g.opset >= 20:
        axis_c = g.const(2) if g.has_input(2) else np.array(-2)
        if axis_c is None:
            raise g.unsupported("the axis input is computed at run time")
        axis = int(np.asarray(axis_c).reshape(-1)[0])
    else:
        axis = int(node.get_attr("axis", 1))
    if not -rank <= axis < rank - 1 and not (axis < 0 and axis + rank < rank - 1):
        raise g.error(f"axis {axis} is out of range (the last axis holds real/imaginary parts)", attr="axis")
    axis %= rank
    inverse, onesided = bool(node.get_attr("inverse", 0)), bool(node.get_attr("onesided", 0))
    n_in = g.static_dim(x, axis, "DFT, a product with constant cos/sin matrices,")
    length_c = g.const(1) if g.has_input(1) else None
    if g.has_input(1) and length_c is None:
        raise g.unsupported("dft_length is computed at run time")
    if length_c is not None:
        length = int(np.asarray(length_c).reshape(-1)[0])
    else:
        length = 2 * (n_in - 1) if inverse and onesided else n_in
    if length < 1:
        raise g.error(f"dft_length {length} must be >= 1")
    real_out = inverse and onesided
    bins = length if (inverse or not onesided) else length // 2 + 1
    cos, sin = _dft_matrices(n_in, length, bins, inverse, real_out)
    perm = [i for i in range(rank - 1) if i != axis] + [axis]
    back = [perm.index(i) for i in range(rank - 1)]

    def part(k: int) -> Value:
        p = g.op("Squeeze", [g.op("Slice", [x], starts=[k], ends=[k + 1], axes=[rank - 1])], axes=[rank - 1])
        return g.op("Transpose", [p], perm=perm)

    xr = part(0)
    xi = part(1) if x.shape[-1] == 2 else None
    c, s_ = g.constant(cos, dtype=x.dtype), g.constant(sin, dtype=x.dtype)

    def mm(a: Value, m: Value) -> Value:
        return g.op("MatMul", [a, m])

    sign = 1.0 if inverse else -1.0
    # forward: (xr + i xi)(cos - i sin); inverse: (xr + i xi)(cos + i sin)
    yr = mm(xr, c)
    if xi is not None:
        yr = g.op("Add", [yr, mm(xi, s_)]) if sign < 0 else g.op("Sub", [yr, mm(xi, s_)])
    outs = [yr]
    if not real_out:
        yi = mm(xr, s_)
        if sign < 0:
            yi = g.op("Neg", [yi])
        if xi is not None:
            yi = g.op("Add", [yi, mm(xi, c)])
        outs.append(yi)
    parts = [g.op("Unsqueeze", [g.op("Transpose", [v], perm=back)], axes=[rank - 1]) for v in outs]
    return parts[0] if len(parts) == 1 else g.op("Concat", parts, axis=rank - 1)
