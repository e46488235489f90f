"""Kernel of Conv (2-D): tiled on N and H, with the halo of its window.

Output rows ``[lo, hi)`` read input rows ``[lo*s - pad_top, (hi-1)*s - pad_top + (k-1)*d + 1)``
(bmcompiler's ``backward_hslice`` / ``backward_hidx``); rows outside the input are padding,
so a tile at the top or bottom edge keeps that padding and an inner tile has none.
"""

from __future__ import annotations

import math

from ...ir.graph import Node
from .registry import register_kernel, tile_pads, window_rows


def _conv2d_params(node: Node) -> tuple[int, int, int, tuple[int, ...]]:
    w = node.inputs[1]
    kh = (node.attrs.get("kernel_shape") or w.shape[2:])[0]
    sh = (node.attrs.get("strides") or (1, 1))[0]
    dh = (node.attrs.get("dilations") or (1, 1))[0]
    pads = tuple(node.attrs.get("pads") or (0, 0, 0, 0))
    return int(kh), int(sh), int(dh), pads


def conv_split(node: Node) -> tuple[str, ...]:
    """Only 2-D convolutions (rank-4 input) are local layers."""
    return ("N", "H") if len(node.inputs[0].shape) == 4 else ()


def conv_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    if i != 0:
        return None
    kh, sh, dh, pads = _conv2d_params(node)
    return window_rows(lo, hi, kh, sh, dh, pads[0])


def conv_tile_attrs(node: Node, lo: int, hi: int, needed, clipped) -> dict:
    attrs = dict(node.attrs)
    _, _, _, pads = _conv2d_params(node)
    attrs["pads"] = tile_pads(pads, needed[0], clipped[0])
    return attrs


def conv_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    """Two FLOPs (multiply, add) per weight tap per output element."""
    w = node.inputs[1].shape
    return 2.0 * math.prod(out_shape) * math.prod(w[1:])


(
    register_kernel("Conv")
    .split_when(lambda n: conv_split(n))
    .input_slice(conv_rows)
    .tile_attrs(conv_tile_attrs)
    .cost(conv_cost)
)
