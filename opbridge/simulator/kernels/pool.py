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
from .registry import register_kernel, static_shape, tile_pads_axis, window_rows


def _params(node: Node, axis: int = 0) -> tuple[int, int, int, tuple[int, ...]]:
    # every pool node holds its per-axis parameters explicitly (the IR fills and verifies them)
    a = node.attrs
    return (int(a["kernel_shape"][axis]), int(a["strides"][axis]), int(a["dilations"][axis]),
            tuple(a["pads"]))


def pool_split(node: Node) -> tuple[str, ...]:
    """N, H and W (a volume's N, depth and rows); counting pads, not an axis whose last window
    hangs past the padded input."""
    if len(static_shape(node.inputs[0])) not in (4, 5) or len(node.outputs) != 1:
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
    return _pool_tile_pads(node, 0, needed, clipped)


def pool_tile_attrs_w(node: Node, lo: int, hi: int, needed, clipped) -> dict:
    """Left / right pads of a column tile (``node.attrs`` carry the row tile's pads)."""
    return _pool_tile_pads(node, 1, needed, clipped)


def _pool_tile_pads(node: Node, axis: int, needed, clipped) -> dict:
    """The pads of a tile along spatial ``axis`` (0: rows or a volume's depth, 1: columns or a
    volume's rows). Counting pads, the end pad stays at most the node's: the overhang must
    not count in the divisor; the tile holds every row then (see pool_split), so ceil mode
    (kept) rounds up to it as the whole pool does."""
    pads = tuple(node.attrs["pads"])
    p = list(tile_pads_axis(pads, axis, needed[0], clipped[0]))
    if node.attrs.get("count_include_pad"):
        end = axis + len(pads) // 2
        p[end] = min(p[end], pads[end])
    return {**node.attrs, "pads": tuple(p)}


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
