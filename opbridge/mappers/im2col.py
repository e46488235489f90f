"""im2col in IR primitives, shared by every framework's mapping of it (TorchScript's
``aten::im2col``, i.e. ``F.unfold``; the Caffe forks' ``Im2col`` layer).

Each output point's kh x kw window of every channel becomes kh * kw values next to the channel
axis, in (c, i, j) order: zero padding, one strided Slice per kernel tap and a Concat of the
taps. Copies only, so exact (an inf or NaN in the input comes out as it went in, where a
convolution with one-hot weights would turn an inf into NaN, inf * 0), and no multiply-adds.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir.graph import Value
from ..ir.ops.conv import out_size
from .context import MapContext


def im2col_taps(g: MapContext, x: Value, kernel: Sequence[int], dilation: Sequence[int],
                pad: Sequence[int], stride: Sequence[int]) -> Value:
    """The columns of the static (N, C, H, W) ``x`` as (N, C, kh * kw, OH, OW): entry
    (n, c, i * kw + j, oy, ox) is x[n, c, oy * sh - ph + i * dh, ox * sw - pw + j * dw], 0 where
    that falls in the padding. The caller checks that the window fits (``out_size`` >= 1)."""
    n, c, h, w = (int(d) for d in x.shape)
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = kernel, dilation, pad, stride
    oh, ow = out_size(h, kh, sh, dh, ph, ph), out_size(w, kw, sw, dw, pw, pw)
    x = g.op("Reshape", [x], shape=[n, c, 1, h, w], allowzero=0)
    if ph or pw:
        x = g.op("Pad", [x], pads=[0, 0, 0, ph, pw, 0, 0, 0, ph, pw], mode="constant", value=0.0)
    taps = [g.op("Slice", [x], starts=[i * dh, j * dw],
                 ends=[i * dh + sh * (oh - 1) + 1, j * dw + sw * (ow - 1) + 1],
                 axes=[3, 4], steps=[sh, sw])
            for i in range(kh) for j in range(kw)]
    return taps[0] if len(taps) == 1 else g.op("Concat", taps, axis=2)
