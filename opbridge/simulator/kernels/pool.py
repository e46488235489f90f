"""Kernels of pooling: windowed pools tile on N and H (with their halo); global pools on N."""

from __future__ import annotations

import math

from ...ir.graph import Node
from .registry import register_kernel, static_shape, tile_pads, window_rows


def _params(node: Node) -> tuple[int, int, int, tuple[int, ...]]:
    k = node.attrs["kernel_shape"]
    s = node.attrs.get("strides") or (1,) * len(k)
    d = node.attrs.get("dilations") or (1,) * len(k)
    pads = tuple(node.attrs.get("pads") or (0,) * (2 * len(k)))
    return int(k[0]), int(s[0]), int(d[0]), pads


def pool_split(node: Node) -> tuple[str, ...]:
    if len(static_shape(node.inputs[0])) != 4 or len(node.outputs) != 1:
        return ()
    # ONNX counts pads but not the ceil-mode overhang in the average's divisor; a tile
    # could not tell the two apart, so such a pool is not cut along H.
    if node.attrs.get("count_include_pad") and node.attrs.get("ceil_mode"):
        return ("N",)
    return ("N", "H")


def pool_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    k, s, d, pads = _params(node)
    return window_rows(lo, hi, k, s, d, pads[0])


def pool_tile_attrs(node: Node, lo: int, hi: int, needed, clipped) -> dict:
    attrs = dict(node.attrs)
    _, _, _, pads = _params(node)
    attrs["pads"] = tile_pads(pads, needed[0], clipped[0])
    # the tile's rows are exactly the windows it needs: no rounding up any more
    attrs["ceil_mode"] = 0
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
