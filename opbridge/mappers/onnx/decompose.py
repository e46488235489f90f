"""Decompositions of ONNX ops into IR primitives (ops the IR has no dedicated op for).

They are ordinary versioned mappings, registered at each ONNX version whose semantics they
implement (the since-versions of ``onnx.defs``); a mapping onto a dedicated IR op would replace
one with ``override=True``. Each follows the ONNX spec:

- QuantizeLinear-10/13/19/21: ``saturate(rint(x / y_scale) + y_zero_point)``, per tensor,
  per axis or per block, to u8, i8, u16, i16, u4, i4, u2, i2; to float8 ``x / y_scale`` cast
  (``saturate``), to float4 ``x / y_scale + y_zero_point`` cast; ``precision`` (23+).
- DequantizeLinear-10/13/19/21/23: ``(x - x_zero_point) * x_scale``.
- DFT-17/20: products with constant cos/sin matrices (zero-padding, onesided, inverse, irfft).
- CumProd-26: running products along an axis (exclusive, reverse), unrolled over that axis.
- QLinearMatMul-10/21: ``saturate(rint((a - a_zp) @ (b - b_zp) * (a_scale * b_scale / y_scale)) + y_zp)``
  with the product in int32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from onnx import helper

from ...ir.graph import Value
from ...ir.types import from_numpy_dtype, to_numpy_dtype
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

#: Integer quantized types and their saturation ranges.
_RANGES = {"u8": (0, 255), "i8": (-128, 127), "u16": (0, 65535), "i16": (-32768, 32767),
           "u4": (0, 15), "i4": (-8, 7), "u2": (0, 3), "i2": (-2, 1)}
#: float8 quantized types: ``x / y_scale`` cast (saturating or not), no zero point.
_FLOAT8 = ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz")
#: float4 quantized type: ``x / y_scale + y_zero_point`` cast, not rounded first.
_FLOAT4 = ("f4e2m1",)


def _onnx_dtype(elem: int, g: MapContext, attr: str) -> str:
    try:
        return from_numpy_dtype(helper.tensor_dtype_to_np_dtype(elem))
    except Exception:
        raise g.unsupported(f"{attr}={elem}: not an IR dtype") from None


def _per_axis(g: MapContext, v: Value, x: Value, axis: int, block_size: int, what: str) -> Value:
    """``v`` (scale or zero point) made to broadcast against ``x`` (per tensor/axis/block)."""
    rank = len(x.shape)
    if len(v.shape) == 0 or (v.shape == (1,) and block_size == 0):
        return v
    if not -rank <= axis < rank:
        raise g.error(f"axis {axis} is out of range for input rank {rank}", attr="axis")
    axis %= rank
    if block_size > 0:
        if len(v.shape) != rank:
            raise g.error(f"{what} must have the input's rank {rank} for blocked quantization",
                          attr="block_size")
        idx = g.constant(np.arange(int(x.shape[axis]), dtype=np.int64) // block_size)
        return g.op("Gather", [v, idx], axis=axis)
    if len(v.shape) != 1 or v.shape[0] != x.shape[axis]:
        raise g.error(f"{what} has shape {list(v.shape)}; per-axis it must be [{x.shape[axis]}]",
                      attr="axis")
    shape = [1] * rank
    shape[axis] = int(x.shape[axis])
    return g.op("Reshape", [v], shape=shape)


def _cast(g: MapContext, v: Value, dtype: str) -> Value:
    return v if v.dtype == dtype else g.op("Cast", [v], to=dtype)


def _saturate(g: MapContext, y_i32: Value, dtype: str) -> Value:
    lo, hi = _RANGES[dtype]
    return g.op("Cast", [g.op("Clip", [y_i32], min=float(lo), max=float(hi))], to=dtype)


def _quant_target(node: OriginNode, g: MapContext, zp: Value | None) -> str:
    """The quantized type: y_zero_point's, else output_dtype (opset 21+), else u8."""
    out = int(node.attrs.get("output_dtype") or 0)
    target = _onnx_dtype(out, g, "output_dtype") if out else None
    if zp is not None:
        if target is not None and target != zp.dtype:
            raise g.error(f"is {target} but y_zero_point is {zp.dtype}; they must agree",
                          attr="output_dtype")
        target = zp.dtype
    target = target or "u8"
    if target not in _RANGES and target not in _FLOAT8 + _FLOAT4:
        kinds = ", ".join((*_RANGES, *_FLOAT8, *_FLOAT4))
        raise g.unsupported(f"quantizing to {target} is not supported (targets: {kinds})")
    return target


def _quant_ratio(node: OriginNode, g: MapContext, x: Value, s: Value) -> Value:
    """``x / y_scale`` in the 'precision' type (opset 23+) or, when absent, the type numpy
    gives the pair (as onnx.reference computes it)."""
    precision = int(node.attrs.get("precision") or 0)
    if precision:
        dtype = _onnx_dtype(precision, g, "precision")
    else:
        dtype = from_numpy_dtype(np.result_type(to_numpy_dtype(x.dtype), to_numpy_dtype(s.dtype)))
    return g.op("Div", [_cast(g, x, dtype), _cast(g, s, dtype)])


@versions("QuantizeLinear", 10, 13, 19, 21)
def quantize_linear(node: OriginNode, g: MapContext) -> Any:
    """Integer targets: ``clip(rint(x / y_scale) + y_zero_point)``; float8: ``x / y_scale`` cast
    with Cast's ``saturate``; float4: ``x / y_scale + y_zero_point`` cast (onnx.reference)."""
    x, scale, zp = g.input(0), g.input(1), g.input(2)
    if x is None or scale is None:
        raise g.error("inputs x and y_scale are required")
    target = _quant_target(node, g, zp)
    axis, block = int(node.get_attr("axis", 1)), int(node.get_attr("block_size", 0))
    ratio = _quant_ratio(node, g, x, _per_axis(g, scale, x, axis, block, "y_scale"))
    if target in _FLOAT8:
        return g.op("Cast", [ratio], to=target, saturate=int(node.get_attr("saturate", 1)))
    if target in _FLOAT4:
        if zp is not None:
            ratio = g.op("Add", [ratio, _per_axis(g, _cast(g, zp, ratio.dtype), x, axis, block,
                                                  "y_zero_point")])
        return g.op("Cast", [ratio], to=target)
    q = g.op("Cast", [g.op("Round", [ratio])], to="i32")
    if zp is not None:
        q = g.op("Add", [q, _per_axis(g, _cast(g, zp, "i32"), x, axis, block, "y_zero_point")])
    return _saturate(g, q, target)


def _float8_zero_point(g: MapContext, zp: Value) -> None:
    """A float8 x_zero_point must be zero (the spec); a constant one is checked."""
    data = g.const(2)
    if data is not None and np.any(np.asarray(data).astype(np.float32) != 0):
        raise g.error(f"x_zero_point of {zp.dtype} must be all zeros",
                      hint="float8 quantization has no zero point; drop it or set it to 0")


@versions("DequantizeLinear", 10, 13, 19, 21, 23)
def dequantize_linear(node: OriginNode, g: MapContext) -> Any:
    """``(x - x_zero_point) * x_scale``; float8 and float4 inputs have no zero point (the
    spec's zero, as onnx.reference: a float4 one is not read)."""
    x, scale, zp = g.input(0), g.input(1), g.input(2)
    if x is None or scale is None:
        raise g.error("inputs x and x_scale are required")
    axis, block = int(node.get_attr("axis", 1)), int(node.get_attr("block_size", 0))
    out = scale.dtype
    if node.attrs.get("output_dtype"):
        out = _onnx_dtype(int(node.attrs["output_dtype"]), g, "output_dtype")
    dx = _cast(g, x, "f32")
    if zp is not None and x.dtype in _FLOAT8:
        _float8_zero_point(g, zp)
    elif zp is not None and x.dtype not in _FLOAT4:
        if zp.dtype != x.dtype:
            raise g.error(f"x_zero_point is {zp.dtype} but x is {x.dtype}; they must agree")
        dx = g.op("Sub", [dx, _per_axis(g, _cast(g, zp, "f32"), x, axis, block, "x_zero_point")])
    y = g.op("Mul", [dx, _per_axis(g, _cast(g, scale, "f32"), x, axis, block, "x_scale")])
    return _cast(g, y, out)


@versions("QLinearMatMul", 10, 21)
def qlinear_matmul(node: OriginNode, g: MapContext) -> Any:
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (g.input(i) for i in range(8))
    if a is None or b is None or a_s is None or b_s is None or y_s is None:
        raise g.error("inputs a, a_scale, b, b_scale and y_scale are required")
    ai = _cast(g, a, "i32")
    if a_zp is not None:
        ai = g.op("Sub", [ai, _cast(g, a_zp, "i32")])
    bi = _cast(g, b, "i32")
    if b_zp is not None:
        bi = g.op("Sub", [bi, _cast(g, b_zp, "i32")])
    c = g.op("MatMul", [ai, bi])
    factor = g.op("Div", [g.op("Mul", [_cast(g, a_s, "f32"), _cast(g, b_s, "f32")]), _cast(g, y_s, "f32")])
    d = g.op("Mul", [_cast(g, c, "f32"), factor])
    target = y_zp.dtype if y_zp is not None else a.dtype
    if target not in _RANGES:
        raise g.unsupported(f"QLinearMatMul output type {target} is not supported")
    if y_zp is not None:
        d = g.op("Add", [d, _cast(g, y_zp, "f32")])
    return _saturate(g, _cast(g, g.op("Round", [d]), "i32"), target)


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
    n = int(x.shape[axis])
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
    n_in = int(x.shape[axis])
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
