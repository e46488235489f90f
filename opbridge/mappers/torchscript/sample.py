"""Spatial sampling: grid_sample (aten::grid_sampler*), fold (aten::col2im) and unfold
(aten::im2col).

``F.grid_sample`` traces to ``aten::grid_sampler(input, grid, interpolation_mode,
padding_mode, align_corners)`` with the modes as ints (ATen's GridSamplerInterpolation and
GridSamplerPadding enums); the IR's GridSample means the same (ONNX took the op from PyTorch).

``im2col(input, kernel_size, dilation, padding, stride)`` (``F.unfold``) turns (N, C, H, W) —
or one image (C, H, W) — into (N, C * kh * kw, L), L the number of block positions; column
``c * kh * kw + i * kw + j`` holds kernel tap (i, j) of channel c
(https://pytorch.org/docs/stable/generated/torch.nn.Unfold.html). Mapped by the shared
``mappers/im2col.py`` (copies only, exact) and a Reshape of its taps into columns.
"""

from __future__ import annotations

from typing import Any

from ...ir.ops.conv import out_size
from ...parsers.origin import OriginNode
from ..context import MapContext
from ..im2col import im2col_taps
from .common import Args, static_shape, ts_mapping

#: ATen's GridSamplerInterpolation and GridSamplerPadding (aten/src/ATen/native/GridSampler.h).
INTERPOLATION = {0: "linear", 1: "nearest", 2: "cubic"}
PADDING = {0: "zeros", 1: "border", 2: "reflection"}


def _enum(g: MapContext, value: int, table: dict[int, str], what: str) -> str:
    if value not in table:
        raise g.error(f"= {value}: not one of {', '.join(f'{k} ({v})' for k, v in table.items())}",
                      attr=what, hint="export the model again with a mode torch documents")
    return table[value]


def _pairs(a: Args, g: MapContext, first: int) -> list[list[int]]:
    """kernel_size, dilation, padding, stride (arguments ``first`` on) as (h, w) pairs, checked
    as torch checks them."""
    out = []
    for i, what, least in ((first, "kernel_size", 1), (first + 1, "dilation", 1), (first + 2, "padding", 0),
                           (first + 3, "stride", 1)):
        vals = a.ints(i, what=what)
        vals = vals * 2 if len(vals) == 1 else vals
        if len(vals) != 2 or min(vals) < least:
            raise g.error(f"= {vals}: two values (height, width), each >= {least}, are needed",
                          attr=what)
        out.append(vals)
    return out


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
    size = a.ints(1, what="output_size")
    image = [int(v) for v in (size * 2 if len(size) == 1 else size)]
    block, dilation, padding, stride = _pairs(a, g, 2)
    unbatched = len(x.shape) == 2  # (C * prod(kernel), L): fold of one image
    if unbatched:
        x = g.op("Unsqueeze", [x], axes=(0,))
    y = g.op("Col2Im", [x], image_shape=tuple(image), block_shape=tuple(block),
             dilations=tuple(dilation), pads=tuple(padding) * 2, strides=tuple(stride))
    return g.op("Squeeze", [y], axes=(0,)) if unbatched else y



@ts_mapping("im2col")
def im2col(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0, "input")
    kernel, dilation, padding, stride = _pairs(a, g, 1)
    shape = static_shape(g, x)
    if len(shape) not in (3, 4):
        raise g.unsupported(f"input of shape {list(shape)}: im2col takes (C, H, W) or (N, C, H, W)")
    n, c, h, w = shape if len(shape) == 4 else (1, *shape)
    oh, ow = (out_size(size, k, s, d, p, p) for size, k, s, d, p in zip((h, w), kernel, stride, dilation, padding))
    if oh < 1 or ow < 1:
        (kh, kw), (dh, dw), (ph, pw) = kernel, dilation, padding
        raise g.error(f"a {kh}x{kw} kernel (dilation {dh}x{dw}) does not fit the padded "
                      f"{h + 2 * ph}x{w + 2 * pw} image", attr="kernel_size")
    if len(shape) == 3:
        x = g.op("Unsqueeze", [x], axes=(0,))
    cols = im2col_taps(g, x, kernel, dilation, padding, stride)
    out = [n, c * kernel[0] * kernel[1], oh * ow] if len(shape) == 4 else [c * kernel[0] * kernel[1], oh * ow]
    return g.op("Reshape", [cols], shape=out, allowzero=0)


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
