"""Kernels of pooling: windowed pools tile on N, H and W (with their halo); global pools on N.

A tile of output rows ``[lo, hi)`` reads the input rows its windows cover (``window_rows``),
clipped to the input; the rows cut off become the tile's top / bottom padding. The tile's
windows then start at the same offsets as the whole pool's and its padded height is exact,
so ceil mode (kept, for an axis that is not cut) rounds nothing up along H and the op's rule
"a window starting in the end padding is dropped" decides as for the whole pool. Columns
are cut the same way (left / right padding), each axis on its own.

In ceil mode the last window may reach past the padded input (the *overhang*). Max, Lp and
an average that does not count pads treat the overhang exactly as padding, so it simply
becomes part of the tile's bottom pad. An average with ``count_include_pad`` counts pads but
not the overhang: such a pool is not cut along an axis (H or W) where it has an overhang,
and its whole-height (whole-width) tile keeps the pool's own end pad, rounding up to the
overhang itself.

A 3-D pool (rank-5 input) is cut along N, its depth D and its rows H (the layer group's H and
W axes: the view (N, C, D, H*W), a column being a whole row of W) by the same rules, the depth
window in place of the rows' and the rows' in place of the columns'.
"""

from __future__ import annotations

import math

from ...ir.graph import Node
from .registry import register_kernel, static_shape, tile_pads, tile_pads_axis, tile_pads_w, window_rows


def _params(node: Node, axis: int = 0) -> tuple[int, int, int, tuple[int, ...]]:
    # every pool node holds its per-axis parameters explicitly (the IR fills and verifies them)
    a = node.attrs
    return (int(a["kernel_shape"][axis]), int(a["strides"][axis]), int(a["dilations"][axis]),
            tuple(a["pads"]))


def pool_split(node: Node) -> tuple[str, ...]:
    rank = len(static_shape(node.inputs[0]))
    if rank == 5 and len(node.outputs) == 1:  # a volume: N, the depth (H) and the rows (W)
        cip = node.attrs.get("count_include_pad")
        return ("N",) + tuple(a for axis, a in ((0, "H"), (1, "W")) if not cip or _overhang(node, axis) == 0)
    if rank != 4 or len(node.outputs) != 1:
        return ()
    if node.attrs.get("count_include_pad"):
        return ("N",) + tuple(a for axis, a in ((0, "H"), (1, "W")) if _overhang(node, axis) == 0)
    return ("N", "H", "W")


def _overhang(node: Node, axis: int = 0) -> int:
    """Rows (columns, ``axis=1``) of the last window past the padded input (ceil mode only)."""
    k, s, d, pads = _params(node, axis)
    h_in, h_out = static_shape(node.inputs[0])[2 + axis], static_shape(node.outputs[0])[2 + axis]
    return max(0, (h_out - 1) * s + (k - 1) * d + 1 - (h_in + pads[axis] + pads[axis + len(pads) // 2]))


def pool_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    k, s, d, pads = _params(node)
    return window_rows(lo, hi, k, s, d, pads[0])


def pool_cols(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    k, s, d, pads = _params(node, 1)
    return window_rows(lo, hi, k, s, d, pads[1])


def pool_tile_attrs(node: Node, lo: int, hi: int, needed, clipped) -> dict:
    attrs = dict(node.attrs)
    _, _, _, pads = _params(node)
    if len(pads) == 6:  # a 3-D pool's tile of depth slices: its front and back pads
        p = list(tile_pads_axis(pads, 0, needed[0], clipped[0]))
        if node.attrs.get("count_include_pad"):
            p[3] = min(p[3], pads[3])  # as for the bottom pad below
        attrs["pads"] = tuple(p)
        return attrs
    top, left, bottom, right = tile_pads(pads, needed[0], clipped[0])
    if node.attrs.get("count_include_pad"):
        # the overhang must not count in the divisor: the tile holds every row (see
        # pool_split), so ceil mode (kept) rounds up to it as the whole pool does
        bottom = min(bottom, pads[2])
    attrs["pads"] = (top, left, bottom, right)
    return attrs


def pool_tile_attrs_w(node: Node, lo: int, hi: int, needed, clipped) -> dict:
    """Left / right pads of a column tile (``node.attrs`` carry the row tile's pads)."""
    attrs = dict(node.attrs)
    pads = tuple(node.attrs["pads"])
    if len(pads) == 6:  # a 3-D pool's tile of rows (the group's W axis): top and bottom pads
        p = list(tile_pads_axis(pads, 1, needed[0], clipped[0]))
        if node.attrs.get("count_include_pad"):
            p[4] = min(p[4], pads[4])
        attrs["pads"] = tuple(p)
        return attrs
    top, left, bottom, right = tile_pads_w(pads, needed[0], clipped[0])
    if node.attrs.get("count_include_pad"):
        right = min(right, pads[3])  # as pool_tile_attrs does for the bottom pad
    attrs["pads"] = (top, left, bottom, right)
    return attrs


def pool_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    return float(math.prod(out_shape) * math.prod(node.attrs["kernel_shape"]))


def global_pool_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    return float(math.prod(out_shape) * math.prod(static_shape(node.inputs[0])[2:]))


for _op in ("MaxPool", "AveragePool", "LpPool"):
    (register_kernel(_op).split_when(pool_split).input_slice(pool_rows)
     .input_slice(pool_cols, axis="W").tile_attrs(pool_tile_attrs)
     .tile_attrs(pool_tile_attrs_w, axis="W").cost(pool_cost).volumes())

for _op in ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"):
    register_kernel(_op).split("N").input_slice(lambda n, i, lo, hi: None).cost(global_pool_cost)
