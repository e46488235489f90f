"""Kernels of Softmax and LogSoftmax: tileable on every axis but the one they normalise."""

from __future__ import annotations

from ...ir.graph import Node
from .registry import register_kernel, static_shape


def softmax_split(node: Node) -> tuple[str, ...]:
    rank = len(static_shape(node.inputs[0]))
    axis = node.attrs["axis"] % max(rank, 1)
    return tuple(a for i, a in ((0, "N"), (2, "H"), (3, "W")) if i != axis)


def _cost(node: Node, out_shape: tuple[int, ...]) -> float:
    n = 1
    for d in out_shape:
        n *= d
    return 6.0 * n  # max, subtract, exp, sum, divide


for _op in ("Softmax", "LogSoftmax"):
    register_kernel(_op).split_when(softmax_split).cost(_cost)
