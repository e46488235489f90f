"""ONNX mappings: activation functions.

Semantics: https://onnx.ai/onnx/operators/. Versions whose meaning differs get their own
mapping: Clip-1 (attributes, absent = no bound), Clip-6 (attributes, absent = +-FLT_MAX),
Clip-11+ (bounds are inputs); PRelu before 7 (a 1-D slope is per channel, axis 1) and from 7
(numpy unidirectional broadcasting). Opset-1 'consumed_inputs' hints are ignored.
"""

from __future__ import annotations

import math
from typing import Any

from ...ir.graph import Value
from ...parsers.origin import OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import LEGACY_HINTS, ONNX, checked_attrs, one_to_one, required_input

for _op, _since, _attrs in (
    ("Relu", 1, ()),
    ("LeakyRelu", 1, ("alpha",)),
    ("Sigmoid", 1, ()),
    ("HardSigmoid", 1, ("alpha", "beta")),
    ("Tanh", 1, ()),
    ("Elu", 1, ("alpha",)),
    ("Selu", 1, ("alpha", "gamma")),
    ("Softplus", 1, ()),
    ("Softsign", 1, ()),
    ("Shrink", 9, ("bias", "lambd")),
    ("ThresholdedRelu", 10, ("alpha",)),
    ("Celu", 12, ("alpha",)),
    ("HardSwish", 14, ()),
    ("Mish", 18, ()),
    ("Gelu", 20, ("approximate",)),
    ("Swish", 24, ("alpha",)),
):
    one_to_one(_op, _since, attrs=_attrs, ignored=LEGACY_HINTS)


# -- PRelu ---------------------------------------------------------------------------------
@mapping(ONNX, "PRelu", since_opset=1)
def prelu_v1(node: OriginNode, g: MapContext) -> Any:
    # before opset 7 a 1-D slope of C values applies per channel (axis 1), Caffe2 style
    checked_attrs(node, g, (), LEGACY_HINTS)
    x, slope = required_input(g, 0, "X"), required_input(g, 1, "slope")
    if len(slope.shape) == 1 and len(x.shape) >= 3 and slope.shape[0] == x.shape[1] != 1:
        slope = g.op("Reshape", [slope], shape=(slope.shape[0],) + (1,) * (len(x.shape) - 2))
    return g.op("PRelu", [x, slope])


one_to_one("PRelu", 7, num_inputs=2)


# -- Clip ----------------------------------------------------------------------------------
@mapping(ONNX, "Clip", since_opset=1)
def clip_v1(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("min", "max"), LEGACY_HINTS)
    return g.op("Clip", [required_input(g, 0, "input")], **a)


@mapping(ONNX, "Clip", since_opset=6)
def clip_v6(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("min", "max"))
    # absent bounds are the schema's -FLT_MAX / FLT_MAX, which differ from "no bound" at +-inf
    return g.op("Clip", [required_input(g, 0, "input")], min=float(node.get_attr("min")),
                max=float(node.get_attr("max")))


def _bound(g: MapContext, i: int, what: str) -> float | Value | None:
    """Clip-11 bound input ``i``: a float when constant and exact as one, else its Value."""
    v = g.input(i)
    if v is None:
        return None
    data = g.const(i)
    if data is None:
        return v
    if data.size != 1:
        raise g.error(f"input {i} ({what}) must hold one value, it has shape {list(data.shape)}",
                      hint="ONNX Clip takes scalar bounds")
    value = data.reshape(()).item()
    as_float = float(value)
    if data.dtype.kind in "iu" and math.isfinite(as_float) and int(as_float) != value:
        return v  # an int64 bound beyond 2**53 is not exact as a float attribute
    return as_float


@mapping(ONNX, "Clip", since_opset=11)
def clip_v11(node: OriginNode, g: MapContext) -> Any:
    # min/max are optional inputs; constant ones become the IR's attributes, dynamic ones
    # become Max/Min (min(max(x, lo), hi) is Clip's definition, 'min > max gives max' included)
    checked_attrs(node, g, ())
    x = required_input(g, 0, "input")
    lo, hi = _bound(g, 1, "min"), _bound(g, 2, "max")
    attrs: dict[str, float] = {}
    if isinstance(lo, float):
        attrs["min"] = lo
    if isinstance(hi, float):
        attrs["max"] = hi
    y = x
    if isinstance(lo, Value):
        y = g.op("Max", [y, lo])
    if attrs or y is x:
        y = g.op("Clip", [y], **attrs)
    if isinstance(hi, Value):
        y = g.op("Min", [y, hi])
    return y


# -- onnxruntime contrib GELU variants (com.microsoft), common in exported transformers ------
@mapping(ONNX, "com.microsoft::Gelu", since_opset=1)
def ms_gelu(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ())
    return g.op("Gelu", [required_input(g, 0, "X")], approximate="none")


@mapping(ONNX, "com.microsoft::BiasGelu", since_opset=1)
def ms_bias_gelu(node: OriginNode, g: MapContext) -> Any:
    # Gelu(A + B), erf form
    checked_attrs(node, g, ())
    x = g.op("Add", [required_input(g, 0, "A"), required_input(g, 1, "B")])
    return g.op("Gelu", [x], approximate="none")


@mapping(ONNX, "com.microsoft::FastGelu", since_opset=1)
def ms_fast_gelu(node: OriginNode, g: MapContext) -> Any:
    # tanh-approximated Gelu of X (+ the optional bias)
    checked_attrs(node, g, ())
    x = required_input(g, 0, "X")
    bias = g.input(1)
    if bias is not None:
        x = g.op("Add", [x, bias])
    return g.op("Gelu", [x], approximate="tanh")


@mapping(ONNX, "com.microsoft::QuickGelu", since_opset=1)
def ms_quick_gelu(node: OriginNode, g: MapContext) -> Any:
    # x * sigmoid(alpha * x), alpha 1.702 unless given
    a = checked_attrs(node, g, ("alpha",))
    return g.op("Swish", [required_input(g, 0, "X")], alpha=float(a.get("alpha", 1.702)))
