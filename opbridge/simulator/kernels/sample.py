"""Cost hooks of the spatial sampling ops (GridSample, Col2Im, DeformConv).

They gather from data-dependent positions, which no tile of a layer group can bound, so they
run as global layers on the op's own compute; only their cost differs from one operation per
output element: a sampled point costs a multiply-add per kernel tap, a column summed back
one add per column entry, and a deformable convolution its sampling plus a convolution's
multiply-adds.
"""

from __future__ import annotations

import math

from ...ir.graph import Node
from .registry import register_kernel, static_shape

#: Taps per spatial axis of each GridSample mode.
_TAPS = {"nearest": 1, "linear": 2, "cubic": 4}


def grid_sample_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    """A multiply-add per tap (per axis: 1 nearest, 2 linear, 4 cubic) per output element, and
    the coordinate arithmetic (about 8 operations per axis) once per output point."""
    nsp = len(out_shape) - 2
    taps = _TAPS.get(str(node.attrs.get("mode", "linear")), 2) ** nsp
    points = out_shape[0] * math.prod(out_shape[2:])
    return 2.0 * taps * math.prod(out_shape) + 8.0 * nsp * points


def col2im_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    """One add per column entry."""
    return float(math.prod(static_shape(node.inputs[0])))


def deform_conv_macs(node: Node, out_shape: tuple[int, ...]) -> float:
    """The FLOPs of DeformConv's multiply-adds (two per weight tap per output element): what
    a convolution of the same shape does."""
    return 2.0 * math.prod(out_shape) * math.prod(static_shape(node.inputs[1])[1:])


def deform_conv_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    """The convolution's two FLOPs per weight tap per output element, plus the bilinear sample
    (a multiply-add per corner, and the mask) of every column entry. The cost model times the
    first as the convolution of the same shape and the rest on the vector path
    (``cost.SAMPLED_CONV_OPS``)."""
    w = static_shape(node.inputs[1])
    x = static_shape(node.inputs[0])
    nsp = len(w) - 2
    kprod = math.prod(w[2:])
    columns = x[0] * x[1] * kprod * math.prod(out_shape[2:])
    return deform_conv_macs(node, out_shape) + (2.0 * 2 ** nsp + 1.0) * columns


register_kernel("GridSample").global_only().cost(grid_sample_cost)
register_kernel("Col2Im").global_only().cost(col2im_cost)
register_kernel("DeformConv").global_only().cost(deform_conv_cost)
