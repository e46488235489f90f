"""ONNX plumbing ops: Constant, Identity, Dropout (inference).

Semantics: https://onnx.ai/onnx/operators/ (Constant-1/9/11/12/13/19/21, Identity, Dropout-1..22).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping

ONNX = Framework.ONNX

#: Constant's value attributes (exactly one is set), and how each becomes an array.
_CONSTANT_VALUES = {
    "value": lambda v: np.asarray(v),
    "sparse_value": lambda v: np.asarray(v),
    "value_float": lambda v: np.asarray(v, np.float32),
    "value_floats": lambda v: np.asarray(v, np.float32).reshape(-1),
    "value_int": lambda v: np.asarray(v, np.int64),
    "value_ints": lambda v: np.asarray(v, np.int64).reshape(-1),
    "value_string": None,
    "value_strings": None,
}


@mapping(ONNX, "Constant", since_opset=1)
def constant(node: OriginNode, g: MapContext) -> Any:
    present = [k for k in node.attrs if k in _CONSTANT_VALUES]
    unknown = sorted(set(node.attrs) - set(_CONSTANT_VALUES))
    if unknown:
        raise g.error("not an attribute of Constant", attr=unknown[0])
    if len(present) != 1:
        raise g.error(f"exactly one value attribute must be set, found {len(present)}: "
                      f"{', '.join(present) or 'none'}",
                      hint="set one of: " + ", ".join(_CONSTANT_VALUES))
    key = present[0]
    conv = _CONSTANT_VALUES[key]
    if conv is None:
        raise g.unsupported(f"string constants ({key}) are not supported by the IR")
    return g.constant(conv(node.attrs[key]))


@mapping(ONNX, "Identity", since_opset=1)
def identity(node: OriginNode, g: MapContext) -> Any:
    x = g.input(0)
    if x is None:
        raise g.error("input 0 is required")
    if x.kind != "tensor":  # a sequence or optional: the same value under the output's name
        return x
    return g.op("Identity", [x])


def _dropout_outputs(node: OriginNode, g: MapContext, x: Any) -> Any:
    y = g.op("Identity", [x])
    if len(node.outputs) > 1 and node.outputs[1]:
        # inference: nothing is dropped, the mask is all true
        return y, g.full_like(x, True, "bool")
    return y


@mapping(ONNX, "Dropout", since_opset=1)
def dropout_v1(node: OriginNode, g: MapContext) -> Any:
    # opsets 1-11: ratio is an attribute; is_test (1-6) only marks inference
    x = g.input(0)
    if x is None:
        raise g.error("input 0 is required")
    return _dropout_outputs(node, g, x)


@mapping(ONNX, "Dropout", since_opset=12)
def dropout_v12(node: OriginNode, g: MapContext) -> Any:
    # opset 12+: ratio and training_mode are inputs; only inference (or ratio 0) is static
    x = g.input(0)
    if x is None:
        raise g.error("input 0 is required")
    training = g.const(2) if g.has_input(2) else np.array(False)
    ratio = g.const(1) if g.has_input(1) else np.array(0.5)
    if training is None:
        raise g.unsupported("training_mode is computed at run time; only inference is supported")
    if bool(np.asarray(training).reshape(-1)[0]) and (ratio is None or float(np.asarray(ratio).reshape(-1)[0]) != 0.0):
        raise g.unsupported("training_mode=True drops values at random; only inference is supported",
                            hint="export the model in eval mode")
    return _dropout_outputs(node, g, x)
