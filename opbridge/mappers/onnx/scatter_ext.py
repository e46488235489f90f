"""ONNX mapping: TensorScatter (opset 24), onto the IR op of the same name.

Semantics: https://onnx.ai/onnx/operators/onnx__TensorScatter.html (a KV cache written at
per-batch indices; ``mode`` linear or circular, ``axis`` the sequence axis, default -2).
"""

from __future__ import annotations

from typing import Any

from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import checked_attrs, required_input

ONNX = Framework.ONNX


@mapping(ONNX, "TensorScatter", since_opset=24)
def tensor_scatter(node: OriginNode, g: MapContext) -> Any:
    attrs = checked_attrs(node, g, ("axis", "mode"))
    cache, update = required_input(g, 0, "past_cache"), required_input(g, 1, "update")
    return g.op("TensorScatter", [cache, update, g.input(2)], **attrs)
