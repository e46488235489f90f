"""``aten::im2col`` (``F.unfold``, ``nn.Unfold``): the sliding blocks of a 2-D image as columns.

``im2col(input, kernel_size, dilation, padding, stride)`` turns (N, C, H, W) — or one image
(C, H, W) — into (N, C * kh * kw, L), L the number of block positions; column ``c * kh * kw +
i * kw + j`` holds kernel tap (i, j) of channel c
(https://pytorch.org/docs/stable/generated/torch.nn.Unfold.html). Mapped as zero padding, one
strided Slice per kernel tap, a Concat of the taps next to the channel axis and a Reshape:
copies only, so exact, where a convolution with one-hot weights would turn an inf into NaN.
The inverse, ``aten::col2im`` (``F.fold``), maps onto the IR's Col2Im.
"""

from __future__ import annotations

from typing import Any

from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, static_shape, ts_mapping


def _pairs(a: Args, g: MapContext) -> list[list[int]]:
    """kernel_size, dilation, padding, stride as (h, w) pairs, checked as torch checks them."""
    out = []
    for i, what, least in ((1, "kernel_size", 1), (2, "dilation", 1), (3, "padding", 0), (4, "stride", 1)):
        vals = a.ints(i, what=what)
        vals = vals * 2 if len(vals) == 1 else vals
        if len(vals) != 2 or min(vals) < least:
            raise g.error(f"= {vals}: two values (height, width), each >= {least}, are needed",
                          attr=what)
        out.append(vals)
    return out


@ts_mapping("im2col")
def im2col(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0, "input")
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _pairs(a, g)
    shape = static_shape(g, x)
    if len(shape) not in (3, 4):
        raise g.unsupported(f"input of shape {list(shape)}: im2col takes (C, H, W) or (N, C, H, W)")
    n, c, h, w = shape if len(shape) == 4 else (1, *shape)
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise g.error(f"a {kh}x{kw} kernel (dilation {dh}x{dw}) does not fit the padded "
                      f"{h + 2 * ph}x{w + 2 * pw} image", attr="kernel_size")
    x = g.op("Reshape", [x], shape=[n, c, 1, h, w], allowzero=0)
    if ph or pw:
        x = g.op("Pad", [x], pads=[0, 0, 0, ph, pw, 0, 0, 0, ph, pw],
                 mode="constant", value=0.0)
    taps = [g.op("Slice", [x], starts=[i * dh, j * dw], ends=[i * dh + sh * (oh - 1) + 1,
                                                              j * dw + sw * (ow - 1) + 1],
                 axes=[3, 4], steps=[sh, sw])
            for i in range(kh) for j in range(kw)]
    cols = taps[0] if len(taps) == 1 else g.op("Concat", taps, axis=2)
    out = [n, c * kh * kw, oh * ow] if len(shape) == 4 else [c * kh * kw, oh * ow]
    return g.op("Reshape", [cols], shape=out, allowzero=0)
