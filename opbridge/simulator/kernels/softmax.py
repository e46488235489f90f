"""Kernels of Softmax and LogSoftmax: tileable on every axis but the one they normalise."""

from __future__ import annotations

from ...ir.graph import Node
from ..memory import view_axis
from .norm import view_axis_attrs
from .registry import register_kernel, static_shape


def softmax_split(node: Node) -> tuple[str, ...]:
    """Every axis but the normalised one, of the rank-4 view for a rank-2/3 input (a
    transformer's softmax over the keys tiles along batch and query rows)."""
    rank = len(static_shape(node.inputs[0]))
    axis = view_axis(rank, node.attrs["axis"])
    return tuple(a for i, a in ((0, "N"), (2, "H"), (3, "W")) if i != axis)


def _cost(node: Node, out_shape: tuple[int, ...]) -> float:
    n = 1
    for d in out_shape:
        n *= d
    return 6.0 * n  # max, subtract, exp, sum, divide


for _op in ("Softmax", "LogSoftmax"):
    register_kernel(_op).split_when(softmax_split).tile_attrs(view_axis_attrs).row_layout().cost(_cost)
