"""Kernels of pooling: windowed pools tile on N and H (with their halo); global pools on N.

A tile of output rows ``[lo, hi)`` reads the input rows its windows cover (``window_rows``),
clipped to the input; the rows cut off become the tile's top / bottom padding. The tile's
windows then start at the same offsets as the whole pool's and its padded height is exact,
so ceil mode (kept, for the W axis, which is never cut) rounds nothing up along H and the
op's rule "a window starting in the end padding is dropped" decides as for the whole pool.

In ceil mode the last window may reach past the padded input (the *overhang*). Max, Lp and
an average that does not count pads treat the overhang exactly as padding, so it simply
becomes part of the tile's bottom pad. An average with ``count_include_pad`` counts pads but
not the overhang: such a pool is not cut along H when it has an overhang there, and its
(whole-height) tile keeps the pool's own bottom pad, rounding up to the overhang itself.
"""

from __future__ import annotations

import math

from ...ir.graph import Node
from .registry import register_kernel, static_shape, tile_pads, window_rows


def _params(node: Node) -> tuple[int, int, int, tuple[int, ...]]:
    # every pool node holds its per-axis parameters explicitly (the IR fills and verifies them)
    a = node.attrs
    return int(a["kernel_shape"][0]), int(a["strides"][0]), int(a["dilations"][0]), tuple(a["pads"])


def pool_split(node: Node) -> tuple[str, ...]:
    if len(static_shape(node.inputs[0])) != 4 or len(node.outputs) != 1:
        return ()
    if node.attrs.get("count_include_pad") and _overhang(node) > 0:
        return ("N",)
    return ("N", "H")


def _overhang(node: Node) -> int:
    """Rows of the last window past the padded input along H (ceil mode only)."""
    k, s, d, pads = _params(node)
    h_in, h_out = static_shape(node.inputs[0])[2], static_shape(node.outputs[0])[2]
    return max(0, (h_out - 1) * s + (k - 1) * d + 1 - (h_in + pads[0] + pads[2]))


def pool_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    k, s, d, pads = _params(node)
    return window_rows(lo, hi, k, s, d, pads[0])


def pool_tile_attrs(node: Node, lo: int, hi: int, needed, clipped) -> dict:
    attrs = dict(node.attrs)
    _, _, _, pads = _params(node)
    top, left, bottom, right = tile_pads(pads, needed[0], clipped[0])
    if node.attrs.get("count_include_pad"):
        # the overhang must not count in the divisor: the tile holds every row (see
        # pool_split), so ceil mode (kept) rounds up to it as the whole pool does
        bottom = min(bottom, pads[2])
    attrs["pads"] = (top, left, bottom, right)
    return attrs


def pool_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    return float(math.prod(out_shape) * math.prod(node.attrs["kernel_shape"]))


def global_pool_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    return float(math.prod(out_shape) * math.prod(static_shape(node.inputs[0])[2:]))


for _op in ("MaxPool", "AveragePool", "LpPool"):
    (register_kernel(_op).split_when(pool_split).input_slice(pool_rows)
     .tile_attrs(pool_tile_attrs).cost(pool_cost))

for _op in ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"):
    register_kernel(_op).split("N").input_slice(lambda n, i, lo, hi: None).cost(global_pool_cost)
