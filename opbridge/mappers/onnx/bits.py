"""ONNX mapping: BitCast (opset 26).

Semantics: https://onnx.ai/onnx/operators/onnx__BitCast.html — the input's bits read as the
type 'to', which must have the same bit width (so the shape stays; the IR op also takes other
widths, for torch's view(dtype), but an ONNX model with them is invalid).
"""

from __future__ import annotations

from typing import Any

from ...ir.ops.bits import BITS
from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import checked_attrs, ir_dtype, required_input

ONNX = Framework.ONNX


@mapping(ONNX, "BitCast", since_opset=26)
def bitcast(node: OriginNode, g: MapContext) -> Any:
    attrs = checked_attrs(node, g, ("to",))
    if "to" not in attrs:
        raise g.error("required but absent", attr="to",
                      hint="give 'to', the TensorProto type to read the bits as")
    x = required_input(g, 0, "input")
    to = ir_dtype(g, attrs["to"])
    if BITS[x.dtype] != BITS[to]:
        raise g.error(f"= {attrs['to']} ({to}, {BITS[to]} bits): the input is {x.dtype} "
                      f"({BITS[x.dtype]} bits); BitCast needs the same bit width", attr="to",
                      hint="pick a type of the input's width, or Cast to convert values")
    return g.op("BitCast", [x], to=to)
