"""ONNX mapping: ImageDecoder-20, onto the IR op of the same name.

Semantics: https://onnx.ai/onnx/operators/onnx__ImageDecoder.html. Decoding needs Pillow, an
optional dependency (``pip install pillow`` or ``opbridge[image]``): without it the node is
refused at conversion, not when the model first runs.
"""

from __future__ import annotations

from typing import Any

from ...ir.ops.image import PILLOW_HINT, pillow_available
from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import checked_attrs, required_input

ONNX = Framework.ONNX


@mapping(ONNX, "ImageDecoder", since_opset=20)
def image_decoder(node: OriginNode, g: MapContext) -> Any:
    attrs = checked_attrs(node, g, ("pixel_format",))
    if not pillow_available():
        raise g.unsupported("decoding images needs Pillow, which is not installed",
                            hint=PILLOW_HINT)
    return g.op("ImageDecoder", [required_input(g, 0, "encoded_stream")], **attrs)
