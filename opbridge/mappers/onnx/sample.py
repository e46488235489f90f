"""ONNX mappings: GridSample, Col2Im and DeformConv, onto the IR ops of the same names.

Semantics: https://onnx.ai/onnx/operators/onnx__GridSample.html, onnx__Col2Im.html and
onnx__DeformConv.html. GridSample-16 names its modes bilinear / bicubic and takes 4-D input
only; GridSample-20 renamed them linear / cubic and takes any spatial rank (22: types only).
Every version allows X of any type: an integer or bool X converts with mode nearest (as
onnx.reference samples it; onnxruntime has no integer kernel) and is refused otherwise (see
``INTEGER_X_HINT`` for why).
Col2Im's image_shape and block_shape inputs must be constant; they become IR attributes.
DeformConv-19 and -22 differ in types only.
"""

from __future__ import annotations

from typing import Any

from ...ir.ops.common import FLOATS
from ...ir.ops.sample import INTEGER_X_HINT
from ...parsers.origin import OriginNode
from ..context import MapContext
from ..registry import mapping
from .conv import conv_attrs, ints_attr
from .elementwise import ONNX, checked_attrs, required_input

GRID_SAMPLE_ATTRS = ("align_corners", "mode", "padding_mode")
#: GridSample-16's mode names -> the IR's (GridSample-20's).
MODES_16 = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
MODES_20 = ("linear", "nearest", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")


def _str(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _grid_sample(node: OriginNode, g: MapContext, modes: dict[str, str]) -> Any:
    checked_attrs(node, g, GRID_SAMPLE_ATTRS)  # absent ones hold the schema's defaults
    x, grid = required_input(g, 0, "X"), required_input(g, 1, "grid")
    mode = _str(node.get_attr("mode"))
    if mode not in modes:
        raise g.error(f"= {mode!r}: must be one of {', '.join(modes)} at opset {g.opset}",
                      attr="mode", hint="GridSample-16 says bilinear/bicubic, -20 linear/cubic")
    padding = _str(node.get_attr("padding_mode"))
    if padding not in PADDING_MODES:
        raise g.error(f"= {padding!r}: must be one of {', '.join(PADDING_MODES)}",
                      attr="padding_mode")
    align = int(node.get_attr("align_corners"))
    if align not in (0, 1):
        raise g.error(f"= {align}: must be 0 or 1", attr="align_corners")
    if x.dtype not in FLOATS and modes[mode] != "nearest":  # why: INTEGER_X_HINT's comment
        raise g.unsupported(f"mode {mode!r} on X of dtype {x.dtype} is not supported: an integer or "
                            f"bool image is sampled with mode 'nearest' only", hint=INTEGER_X_HINT)
    return g.op("GridSample", [x, grid], mode=modes[mode], padding_mode=padding,
                align_corners=align)


@mapping(ONNX, "GridSample", since_opset=16)
def grid_sample_v16(node: OriginNode, g: MapContext) -> Any:
    x = required_input(g, 0, "X")
    if len(x.shape) != 4:
        raise g.error(f"input X has rank {len(x.shape)}; GridSample-16 takes 4-D input (N, C, H, W)",
                      hint="volumes need GridSample-20: re-export with opset 20 or later")
    return _grid_sample(node, g, MODES_16)


@mapping(ONNX, "GridSample", since_opset=20)
def grid_sample_v20(node: OriginNode, g: MapContext) -> Any:
    return _grid_sample(node, g, {m: m for m in MODES_20})


@mapping(ONNX, "Col2Im", since_opset=18)
def col2im(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("dilations", "pads", "strides"))
    x = required_input(g, 0, "input")
    image = tuple(int(v) for v in g.require_const(1, "image_shape").reshape(-1))
    block = tuple(int(v) for v in g.require_const(2, "block_shape").reshape(-1))
    attrs: dict[str, Any] = {k: tuple(int(v) for v in a[k]) for k in a}
    return g.op("Col2Im", [x], image_shape=image, block_shape=block, **attrs)


@mapping(ONNX, "DeformConv", since_opset=19)
def deform_conv(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("dilations", "group", "kernel_shape", "offset_group", "pads", "strides"))
    x, w = required_input(g, 0, "X"), required_input(g, 1, "W")
    offset = required_input(g, 2, "offset")
    attrs = conv_attrs(node, g, x, w)
    nsp = len(x.shape) - 2
    attrs["pads"] = ints_attr(node, g, "pads", 2 * nsp) or (0,) * (2 * nsp)
    attrs["offset_group"] = int(node.get_attr("offset_group"))
    return g.op("DeformConv", [x, w, offset, g.input(3), g.input(4)], **attrs)
