"""ONNX mappings of onnxruntime's ``com.microsoft`` quantized ops (the QOperator format its
quantizer writes): QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearConcat,
QLinearAveragePool, QLinearGlobalAveragePool, QGemm, DynamicQuantizeLSTM (QuantizeLinear and
DequantizeLinear of that domain map in quant.py).

Each follows onnxruntime's CPU kernels (contrib_ops/cpu/quantization and MLAS):

- QLinearAdd / QLinearMul: ``round_half_even((sa * (a - za)) op (sb * (b - zb)) / sc) + zc`` in
  float32 (MLAS's portable kernel) = DequantizeLinear, the float op, QuantizeLinear.
- QLinearSigmoid / QLinearLeakyRelu: a 256-entry table of quantize(f(dequantize(q))), i.e. the
  same chain per element.
- QLinearConcat: every input requantized to the output's scale and zero point, then joined.
- QLinearAveragePool: dequantize, average (float32, window order), then
  ``round_half_even(y / y_scale + y_zero_point)`` with the zero point added in float32.
- QLinearGlobalAveragePool: i32 sum of (x - x_zero_point) over the image, times
  ``x_scale / (y_scale * N)`` in float32, rounded half to even, plus y_zero_point.
- QGemm: i32 ``(A - za)(B - zb) + C``, times ``alpha * a_scale * b_scale / y_scale`` (float32, per
  column of B); requantized when y_zero_point is given, else the float output.
- DynamicQuantizeLSTM: the LSTM with its int8 W and R dequantized (per tensor or per gate
  column); onnxruntime also quantizes X and h at run time, which this float LSTM does not.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import required_input
from .quant import MS, as_f32, as_i32, out_type, output_scale, requantize_float, with_quant
from .schema_defaults import declare_schema

ONNX = Framework.ONNX

_POOL = {"auto_pad": "NOTSET", "ceil_mode": 0, "channels_last": 0, "count_include_pad": 0,
         "kernel_shape": None, "pads": None, "strides": None}
_LSTM = {"activation_alpha": None, "activation_beta": None, "activations": None, "clip": None,
         "direction": "forward", "hidden_size": None, "input_forget": 0}
for _op, _attrs in (("QLinearAdd", {}), ("QLinearMul", {}), ("QLinearSigmoid", {}),
                    ("QLinearLeakyRelu", {"alpha": 0.01}), ("QLinearConcat", {"axis": None}),
                    ("QLinearAveragePool", _POOL), ("QLinearGlobalAveragePool", {"channels_last": 0}),
                    ("QGemm", {"alpha": 1.0, "transA": 0, "transB": 0}),
                    ("DynamicQuantizeLSTM", _LSTM)):
    declare_schema(MS, _op, _attrs)


def dequantize(g: MapContext, x: Value, scale: Value, zp: Value | None) -> Value:
    """Per-tensor DequantizeLinear (f32)."""
    return g.op("DequantizeLinear", [x, as_f32(g, scale), zp], axis=1, block_size=0)


def quantize(g: MapContext, y: Value, scale: Value, zp: Value | None, out: str) -> Value:
    q = g.op("QuantizeLinear", [y, as_f32(g, scale), zp], axis=1, block_size=0, saturate=1,
             output_dtype=out)
    return with_quant(q, scale, zp)


def _binary(node: OriginNode, g: MapContext, op: str) -> Value:
    a, b = required_input(g, 0, "A"), required_input(g, 3, "B")
    c_zp = g.input(7)
    fa = dequantize(g, a, required_input(g, 1, "A_scale"), g.input(2))
    fb = dequantize(g, b, required_input(g, 4, "B_scale"), g.input(5))
    return quantize(g, g.op(op, [fa, fb]), required_input(g, 6, "C_scale"), c_zp, out_type(g, c_zp, a))


@mapping(ONNX, f"{MS}::QLinearAdd", since_opset=1)
def qlinear_add(node: OriginNode, g: MapContext) -> Any:
    return _binary(node, g, "Add")


@mapping(ONNX, f"{MS}::QLinearMul", since_opset=1)
def qlinear_mul(node: OriginNode, g: MapContext) -> Any:
    return _binary(node, g, "Mul")


def _unary(node: OriginNode, g: MapContext, op: str, **attrs: Any) -> Value:
    x, y_zp = required_input(g, 0, "X"), g.input(4)
    fx = dequantize(g, x, required_input(g, 1, "X_scale"), g.input(2))
    return quantize(g, g.op(op, [fx], **attrs), required_input(g, 3, "Y_scale"), y_zp, out_type(g, y_zp, x))


@mapping(ONNX, f"{MS}::QLinearSigmoid", since_opset=1)
def qlinear_sigmoid(node: OriginNode, g: MapContext) -> Any:
    return _unary(node, g, "Sigmoid")


@mapping(ONNX, f"{MS}::QLinearLeakyRelu", since_opset=1)
def qlinear_leaky_relu(node: OriginNode, g: MapContext) -> Any:
    return _unary(node, g, "LeakyRelu", alpha=float(node.get_attr("alpha")))


@mapping(ONNX, f"{MS}::QLinearConcat", since_opset=1)
def qlinear_concat(node: OriginNode, g: MapContext) -> Any:
    """Inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per joined tensor."""
    y_s, y_zp = required_input(g, 0, "Y_scale"), required_input(g, 1, "Y_zero_point")
    if g.num_inputs < 5 or (g.num_inputs - 2) % 3:
        raise g.error(f"has {g.num_inputs} inputs; it takes Y_scale, Y_zero_point and then "
                      "(X, X_scale, X_zero_point) triples")
    parts = [dequantize(g, required_input(g, i, f"X{i}"), required_input(g, i + 1, f"X{i}_scale"), g.input(i + 2))
             for i in range(2, g.num_inputs, 3)]
    joined = g.op("Concat", parts, axis=int(node.get_attr("axis")))
    return quantize(g, joined, y_s, y_zp, out_type(g, y_zp, y_zp))


def _to_channels_first(g: MapContext, x: Value, channels_last: bool) -> Value:
    if not channels_last:
        return x
    r = len(x.shape)
    return g.op("Transpose", [x], perm=[0, r - 1, *range(1, r - 1)])


def _to_channels_last(g: MapContext, y: Value, channels_last: bool) -> Value:
    if not channels_last:
        return y
    r = len(y.shape)
    return g.op("Transpose", [y], perm=[0, *range(2, r), 1])


@mapping(ONNX, f"{MS}::QLinearAveragePool", since_opset=1)
def qlinear_average_pool(node: OriginNode, g: MapContext) -> Any:
    """Inputs X, x_scale, x_zero_point, y_scale, y_zero_point; AveragePool's attributes."""
    from .pool import window_attrs

    last = bool(int(node.get_attr("channels_last")))
    x, y_zp = required_input(g, 0, "X"), g.input(4)
    fx = _to_channels_first(g, dequantize(g, x, required_input(g, 1, "x_scale"), g.input(2)), last)
    _x, attrs = window_attrs(node, _Sub(g, {0: fx}))  # type: ignore[arg-type]
    pooled = g.op("AveragePool", [fx], count_include_pad=int(node.get_attr("count_include_pad")), **attrs)
    pooled = _to_channels_last(g, pooled, last)
    # onnxruntime's kernel rounds y / y_scale + y_zero_point (the zero point added in float32)
    y_s = required_input(g, 3, "y_scale")
    shifted = g.op("Div", [pooled, as_f32(g, y_s)])
    if y_zp is not None:
        shifted = g.op("Add", [shifted, as_f32(g, y_zp)])
    out = out_type(g, y_zp, x)
    q = g.op("QuantizeLinear", [shifted, g.constant(np.array(1.0, np.float32))], axis=1, block_size=0,
             saturate=1, output_dtype=out)
    return with_quant(q, y_s, y_zp)


@mapping(ONNX, f"{MS}::QLinearGlobalAveragePool", since_opset=1)
def qlinear_global_average_pool(node: OriginNode, g: MapContext) -> Any:
    """round_half_even(f32(sum(x) - x_zp * N) * (x_scale / (y_scale * N))) + y_zp (MLAS)."""
    x, x_zp, y_zp = required_input(g, 0, "X"), g.input(2), g.input(4)
    last = bool(int(node.get_attr("channels_last")))
    r = len(x.shape)
    axes = tuple(range(1, r - 1)) if last else tuple(range(2, r))
    n = int(np.prod([g.static_dim(x, a, "the averaged count") for a in axes]))
    total = g.op("ReduceSum", [as_i32(g, x)], axes=axes, keepdims=1)
    if x_zp is not None:
        total = g.op("Sub", [total, g.op("Mul", [as_i32(g, x_zp), g.constant(np.array(n, np.int32))])])
    n_f = g.constant(np.array(float(n), np.float32))
    scale = g.op("Div", [as_f32(g, required_input(g, 1, "x_scale")), g.op("Mul", [as_f32(g, required_input(g, 3, "y_scale")), n_f])])
    return with_quant(requantize_float(g, total, scale, 1, y_zp, out_type(g, y_zp, x)),
                      required_input(g, 3, "y_scale"), y_zp)


@mapping(ONNX, f"{MS}::QGemm", since_opset=1)
def qgemm(node: OriginNode, g: MapContext) -> Any:
    """Inputs A, a_scale, a_zp, B, b_scale, b_zp, C (i32), y_scale, y_zero_point."""
    a, b = required_input(g, 0, "A"), required_input(g, 3, "B")
    if int(node.get_attr("transA")):
        a = g.op("Transpose", [a], perm=[1, 0])
    if int(node.get_attr("transB")):
        b = g.op("Transpose", [b], perm=[1, 0])
    a_zp, b_zp = g.input(2), g.input(5)
    acc = g.op("MatMulInteger", [a, b, _scalar(g, a_zp), _scalar(g, b_zp)])
    if g.input(6) is not None:
        acc = g.op("Add", [acc, as_i32(g, required_input(g, 6, "C"))])
    alpha = g.constant(np.array(float(node.get_attr("alpha")), np.float32))
    scale = output_scale(g, alpha, required_input(g, 1, "a_scale"), required_input(g, 4, "b_scale"), divisor=g.input(7))
    scale = _scalar(g, scale)
    y_zp = g.input(8)
    if y_zp is None:
        return g.op("DequantizeLinear", [acc, scale], axis=1, block_size=0)
    return with_quant(requantize_float(g, acc, scale, 1, y_zp, out_type(g, y_zp, a)),
                      required_input(g, 7, "y_scale"), y_zp)


def _scalar(g: MapContext, v: Value | None) -> Value | None:
    if v is None or tuple(v.shape) != (1,):
        return v
    return g.op("Reshape", [v], shape=[])


class _Sub:
    """A MapContext whose inputs ``replace`` stand in for the node's own (an inner op's view)."""

    def __init__(self, g: MapContext, replace: dict[int, Value | None]) -> None:
        self._g, self._replace = g, replace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._g, name)

    def input(self, i: int) -> Value | None:
        return self._replace[i] if i in self._replace else self._g.input(i)

    def has_input(self, i: int) -> bool:
        return self._replace[i] is not None if i in self._replace else self._g.has_input(i)

    def const(self, i: int) -> np.ndarray | None:
        if i in self._replace:
            v = self._replace[i]
            return None if v is None else v.data
        return self._g.const(i)


def _dequantized_weight(g: MapContext, w: Value, scale: Value, zp: Value | None) -> Value:
    """W [D, I, 4H] (int8/uint8) with scale/zero point [D] or [D, 4H], as the float [D, 4H, I]
    the ONNX LSTM takes."""
    d, _, cols = (int(s) for s in w.shape)
    shape = [d, 1, cols] if len(scale.shape) == 2 else [d, 1, 1]
    wf = as_f32(g, w)
    if zp is not None:
        wf = g.op("Sub", [wf, g.op("Reshape", [as_f32(g, zp)], shape=shape)])
    wf = g.op("Mul", [wf, g.op("Reshape", [as_f32(g, scale)], shape=shape)])
    return g.op("Transpose", [wf], perm=[0, 2, 1])


@mapping(ONNX, f"{MS}::DynamicQuantizeLSTM", since_opset=1)
def dynamic_quantize_lstm(node: OriginNode, g: MapContext) -> Any:
    """The ONNX LSTM (rnn.py) over the dequantized W and R; inputs 0-7 are LSTM's."""
    from .rnn import recurrent

    w = _dequantized_weight(g, required_input(g, 1, "W"), required_input(g, 8, "W_scale"), g.input(9))
    r = _dequantized_weight(g, required_input(g, 2, "R"), required_input(g, 10, "R_scale"), g.input(11))
    lstm = dataclasses.replace(node, op_type="LSTM", inputs=node.inputs[:8])
    return recurrent(lstm, _Sub(g, {1: w, 2: r}))  # type: ignore[arg-type]
