"""ONNX mappings of quantized models: QDQ (QuantizeLinear / DequantizeLinear), the integer ops
(QLinearConv, QLinearMatMul, DynamicQuantizeLinear; ConvInteger and MatMulInteger map in conv.py
and matmul.py), and the QOperator ops onnxruntime's quantizer writes in ``com.microsoft``.

QuantizeLinear and DequantizeLinear map onto the IR ops of the same name at every version.
Every integer op whose output is requantized keeps onnxruntime's arithmetic (MLAS
``MlasRequantizeOutput``): an exact i32 accumulator (ConvInteger / MatMulInteger, plus the i32
bias), times a float32 output scale computed in onnxruntime's order (``x_scale * w_scale /
y_scale``), rounded half to even, plus the output zero point, saturated. In the IR that is
``DequantizeLinear(acc, scale)`` followed by ``QuantizeLinear(., 1.0, y_zero_point)``, which
computes exactly that; the ``fold_qdq`` pass can turn it into the chip's fixed-point Requantize.

The com.microsoft element-wise ops are computed as their onnxruntime reference kernels define
them: QLinearAdd/Mul dequantize both inputs in float32, combine, divide by the output scale and
round half to even; QLinearSigmoid/LeakyRelu are onnxruntime lookup tables built from
dequantize -> f -> quantize; QLinearConcat requantizes each input to the output's parameters;
QLinearGlobalAveragePool sums in int32 and requantizes with ``x_scale / (y_scale * N)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper

from ...ir.graph import Value
from ...ir.ops.quant import FLOAT4, FLOAT8, INT_RANGES
from ...ir.quantparams import QuantParams
from ...ir.types import from_numpy_dtype
from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import MapFn, mapping
from .elementwise import required_input
from .schema_defaults import declare_schema

ONNX = Framework.ONNX
MS = "com.microsoft"
declare_schema(MS, "QuantizeLinear", {"axis": 1})
declare_schema(MS, "DequantizeLinear", {"axis": 1})


def _versions(op_type: str, *since: int) -> Any:
    def deco(fn: MapFn) -> MapFn:
        for v in since:
            mapping(ONNX, op_type, since_opset=v)(fn)
        return fn

    return deco


def _onnx_dtype(elem: int, g: MapContext, attr: str) -> str:
    try:
        return from_numpy_dtype(helper.tensor_dtype_to_np_dtype(elem))
    except Exception:
        raise g.unsupported(f"{attr}={elem}: not an IR dtype") from None


def as_f32(g: MapContext, v: Value) -> Value:
    return v if v.dtype == "f32" else g.op("Cast", [v], to="f32")


def as_i32(g: MapContext, v: Value) -> Value:
    return v if v.dtype == "i32" else g.op("Cast", [v], to="i32")


# -- QuantizeLinear / DequantizeLinear ---------------------------------------------------------------
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
    if target not in (*INT_RANGES, *FLOAT8, *FLOAT4):
        kinds = ", ".join((*INT_RANGES, *FLOAT8, *FLOAT4))
        raise g.unsupported(f"quantizing to {target} is not supported (targets: {kinds})")
    return target


@_versions("QuantizeLinear", 10, 13, 19, 21)
@mapping(ONNX, f"{MS}::QuantizeLinear", since_opset=1)
def quantize_linear(node: OriginNode, g: MapContext) -> Any:
    """QuantizeLinear (ai.onnx 10-25, com.microsoft 1) onto the IR op, every attribute explicit."""
    x, scale, zp = required_input(g, 0, "x"), required_input(g, 1, "y_scale"), g.input(2)
    precision = int(node.attrs.get("precision") or 0)
    layout = _layout_attrs(node)
    y = g.op("QuantizeLinear", [x, scale, zp], **layout,
             saturate=int(node.attrs.get("saturate", 1)), output_dtype=_quant_target(node, g, zp),
             precision=_onnx_dtype(precision, g, "precision") if precision else None)
    if not layout["block_size"]:
        annotate(y, scale, zp, layout["axis"])
    return y


def annotate(v: Value, scale: Value, zp: Value | None, axis: int) -> None:
    """Give an integer ``v`` its QuantParams where the scale and zero point are constants."""
    if v.dtype in INT_RANGES and scale.data is not None and (zp is None or zp.data is not None):
        v.quant = QuantParams.of_constants(scale.data, None if zp is None else zp.data, axis, len(v.shape))


def _layout_attrs(node: OriginNode) -> dict[str, int]:
    """axis and block_size; a version without them (QuantizeLinear-10: no axis, before 21: no
    block_size) quantizes per tensor or per axis, which axis 1 and block_size 0 say."""
    return {"axis": int(node.attrs.get("axis", 1)), "block_size": int(node.attrs.get("block_size", 0))}


def _float_zero_point(g: MapContext, x: Value, zp: Value) -> None:
    """A float8 x_zero_point must be zero (the spec); a constant one is checked."""
    data = g.const(2)
    if x.dtype in FLOAT8 and data is not None and np.any(np.asarray(data).astype(np.float32) != 0):
        raise g.error(f"x_zero_point of {zp.dtype} must be all zeros",
                      hint="float8 quantization has no zero point; drop it or set it to 0")


@_versions("DequantizeLinear", 10, 13, 19, 21, 23)
@mapping(ONNX, f"{MS}::DequantizeLinear", since_opset=1)
def dequantize_linear(node: OriginNode, g: MapContext) -> Any:
    """DequantizeLinear onto the IR op; a float8/float4 input's zero point (zero by the spec) is
    dropped, and output_dtype (23+) other than the scale's type is a Cast after it."""
    x, scale, zp = required_input(g, 0, "x"), required_input(g, 1, "x_scale"), g.input(2)
    if zp is not None and x.dtype in FLOAT8 + FLOAT4 + ("f8e8m0",):
        _float_zero_point(g, x, zp)
        zp = None
    layout = _layout_attrs(node)
    y = g.op("DequantizeLinear", [x, scale, zp], **layout)
    if x.data is not None and not layout["block_size"] and x.quant is None:
        annotate(x, scale, zp, layout["axis"])  # a quantized weight
    out = int(node.attrs.get("output_dtype") or 0)
    if out and _onnx_dtype(out, g, "output_dtype") != y.dtype:
        y = g.op("Cast", [y], to=_onnx_dtype(out, g, "output_dtype"))
    return y


# -- requantizing an i32 accumulator as onnxruntime does -------------------------------------------
def requantize_float(g: MapContext, acc: Value, scale: Value, axis: int, y_zp: Value | None,
                     out: str) -> Value:
    """round_half_even(f32(acc) * scale) + y_zp, saturated to ``out`` (MlasRequantizeOutput):
    DequantizeLinear(acc, scale) then QuantizeLinear(., 1, y_zp)."""
    real = g.op("DequantizeLinear", [acc, scale], axis=axis, block_size=0)
    return g.op("QuantizeLinear", [real, g.constant(np.array(1.0, np.float32)), y_zp], axis=axis,
                block_size=0, saturate=1, output_dtype=out)


def with_quant(y: Value, scale: Value, zp: Value | None) -> Value:
    """``y`` (a QLinear op's output) annotated with its output scale and zero point."""
    annotate(y, scale, zp, 1)
    return y


def output_scale(g: MapContext, *factors: Value, divisor: Value | None = None) -> Value:
    """The product of ``factors`` (left to right) divided by ``divisor``, in float32: the order
    onnxruntime computes its output scales in (constants fold at once)."""
    s = as_f32(g, factors[0])
    for f in factors[1:]:
        s = g.op("Mul", [s, as_f32(g, f)])
    return g.op("Div", [s, as_f32(g, divisor)]) if divisor is not None else s


def _vector_or_scalar(g: MapContext, v: Value) -> Value:
    """A [1] scale or zero point as a scalar (so it broadcasts per tensor)."""
    return g.op("Reshape", [v], shape=[]) if tuple(v.shape) == (1,) else v


def out_type(g: MapContext, y_zp: Value | None, default: Value) -> str:
    t = y_zp.dtype if y_zp is not None else default.dtype
    if t not in INT_RANGES:
        raise g.unsupported(f"a quantized output of type {t} is not supported (u8, i8, u16, i16)")
    return t


# -- QLinearConv / QLinearMatMul ---------------------------------------------------------------------
@mapping(ONNX, "QLinearConv", since_opset=10)
def qlinear_conv(node: OriginNode, g: MapContext) -> Any:
    """ConvInteger + i32 bias, requantized with x_scale * w_scale / y_scale (per output channel)."""
    from .conv import conv_attrs, resolve_pads

    x, w = required_input(g, 0, "x"), required_input(g, 3, "w")
    xs, xz, ws, wz = required_input(g, 1, "x_scale"), g.input(2), required_input(g, 4, "w_scale"), g.input(5)
    ys, yz, bias = required_input(g, 6, "y_scale"), g.input(7), g.input(8)
    attrs = conv_attrs(node, g, x, w)
    attrs["pads"] = resolve_pads(node, g, x, attrs["kernel_shape"], attrs["strides"], attrs["dilations"])
    acc = g.op("ConvInteger", [x, w, _vector_or_scalar(g, xz) if xz is not None else None,
                               _vector_or_scalar(g, wz) if wz is not None else None], **attrs)
    if bias is not None:
        shape = [1, int(w.shape[0])] + [1] * (len(x.shape) - 2)
        acc = g.op("Add", [acc, g.op("Reshape", [as_i32(g, bias)], shape=shape)])
    scale = _vector_or_scalar(g, output_scale(g, xs, ws, divisor=ys))
    return with_quant(requantize_float(g, acc, scale, 1, yz, out_type(g, yz, x)), ys, yz)


@_versions("QLinearMatMul", 10, 21)
def qlinear_matmul(node: OriginNode, g: MapContext) -> Any:
    """MatMulInteger, requantized with a_scale * b_scale / y_scale (per column of B)."""
    a, b = required_input(g, 0, "a"), required_input(g, 3, "b")
    a_s, a_z, b_s, b_z = required_input(g, 1, "a_scale"), g.input(2), required_input(g, 4, "b_scale"), g.input(5)
    y_s, y_z = required_input(g, 6, "y_scale"), g.input(7)
    if a.dtype not in ("i8", "u8") or b.dtype not in ("i8", "u8"):
        raise g.unsupported(f"QLinearMatMul of {a.dtype} x {b.dtype} (only int8/uint8 operands)")
    acc = g.op("MatMulInteger", [a, b, _vector_or_scalar(g, a_z) if a_z is not None else None,
                                 _vector_or_scalar(g, b_z) if b_z is not None else None])
    scale = _vector_or_scalar(g, output_scale(g, a_s, b_s, divisor=y_s))
    return with_quant(requantize_float(g, acc, scale, len(acc.shape) - 1, y_z, out_type(g, y_z, a)),
                      y_s, y_z)


# -- DynamicQuantizeLinear ---------------------------------------------------------------------------
@mapping(ONNX, "DynamicQuantizeLinear", since_opset=11)
def dynamic_quantize_linear(node: OriginNode, g: MapContext) -> Any:
    """y_scale = (max(0, max x) - min(0, min x)) / 255; y_zero_point = saturate(round(-min / y_scale));
    y = QuantizeLinear(x, y_scale, y_zero_point) (u8), as the spec computes them."""
    x = as_f32(g, required_input(g, 0, "x"))
    zero = g.constant(np.array(0.0, np.float32))
    lo = g.op("Min", [g.op("ReduceMin", [x], axes=(), keepdims=0), zero])
    hi = g.op("Max", [g.op("ReduceMax", [x], axes=(), keepdims=0), zero])
    scale = g.op("Div", [g.op("Sub", [hi, lo]), g.constant(np.array(255.0, np.float32))])
    zp = g.op("QuantizeLinear", [g.op("Neg", [lo]), scale], axis=1, block_size=0, saturate=1,
              output_dtype="u8")
    y = g.op("QuantizeLinear", [x, scale, zp], axis=1, block_size=0, saturate=1, output_dtype="u8")
    return y, scale, zp
