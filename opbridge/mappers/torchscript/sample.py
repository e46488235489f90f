"""Spatial sampling: grid_sample (aten::grid_sampler*) and fold (aten::col2im).

``F.grid_sample`` traces to ``aten::grid_sampler(input, grid, interpolation_mode,
padding_mode, align_corners)`` with the modes as ints (ATen's GridSamplerInterpolation and
GridSamplerPadding enums); the IR's GridSample means the same (ONNX took the op from PyTorch).
"""

from __future__ import annotations

from typing import Any

from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, ts_mapping

#: ATen's GridSamplerInterpolation and GridSamplerPadding (aten/src/ATen/native/GridSampler.h).
INTERPOLATION = {0: "linear", 1: "nearest", 2: "cubic"}
PADDING = {0: "zeros", 1: "border", 2: "reflection"}


def _enum(g: MapContext, value: int, table: dict[int, str], what: str) -> str:
    if value not in table:
        raise g.error(f"= {value}: not one of {', '.join(f'{k} ({v})' for k, v in table.items())}",
                      attr=what, hint="export the model again with a mode torch documents")
    return table[value]


@ts_mapping("grid_sampler", "grid_sampler_2d", "grid_sampler_3d")
def grid_sampler(node: OriginNode, g: MapContext) -> Any:
    # (input, grid, interpolation_mode, padding_mode, align_corners)
    a = Args(node, g)
    x, grid = a.tensor(0, "input"), a.tensor(1, "grid")
    mode = _enum(g, a.int(2, what="interpolation_mode"), INTERPOLATION, "interpolation_mode")
    padding = _enum(g, a.int(3, what="padding_mode"), PADDING, "padding_mode")
    align = int(bool(a.py(4, False, "align_corners")))
    return g.op("GridSample", [x, grid], mode=mode, padding_mode=padding, align_corners=align)


@ts_mapping("col2im")
def col2im(node: OriginNode, g: MapContext) -> Any:
    # (input, output_size, kernel_size, dilation, padding, stride): F.fold; 2-D images only
    a = Args(node, g)
    x = a.tensor(0, "input")
    per_axis = [a.ints(i, what=what) for i, what in
                ((1, "output_size"), (2, "kernel_size"), (3, "dilation"), (4, "padding"), (5, "stride"))]
    image, block, dilation, padding, stride = (
        [int(v) for v in (vals * 2 if len(vals) == 1 else vals)] for vals in per_axis)
    unbatched = len(x.shape) == 2  # (C * prod(kernel), L): fold of one image
    if unbatched:
        x = g.op("Unsqueeze", [x], axes=(0,))
    y = g.op("Col2Im", [x], image_shape=tuple(image), block_shape=tuple(block),
             dilations=tuple(dilation), pads=tuple(padding) * 2, strides=tuple(stride))
    return g.op("Squeeze", [y], axes=(0,)) if unbatched else y


@ts_mapping("torchvision::deform_conv2d")
def deform_conv2d(node: OriginNode, g: MapContext) -> Any:
    # (input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dilation_h,
    #  dilation_w, groups, offset_groups, use_mask): torchvision.ops.deform_conv2d, whose
    # wrapper always passes a bias (zeros when absent) and a mask (read only with use_mask)
    a = Args(node, g)
    x, w, offset = a.tensor(0, "input"), a.tensor(1, "weight"), a.tensor(2, "offset")
    mask = a.tensor(3, "mask") if bool(a.py(13, False, "use_mask")) else None
    bias = a.optional_tensor(4)
    sh, sw, ph, pw, dh, dw = (a.int(i, what=what) for i, what in enumerate(
        ("stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w"), start=5))
    return g.op("DeformConv", [x, w, offset, bias, mask], strides=(sh, sw), pads=(ph, pw, ph, pw),
                dilations=(dh, dw), group=a.int(11, what="groups"),
                offset_group=a.int(12, what="offset_groups"))
