"""Kernel of MatMul on rank-4 operands ([N, heads, rows, k] @ [N, heads, k, cols]).

The left operand's rows are the output's rows, so it tiles on N and H; the right operand (a
rank-4 tensor, or a constant weight of any rank) is needed whole. MatMul of other ranks and
Gemm run as global layers.
"""

from __future__ import annotations

import math

from ...ir.graph import Node
from .registry import register_kernel, static_shape


def matmul_split(node: Node) -> tuple[str, ...]:
    """Rows of A tile freely; B is taken whole (a constant weight, or a rank-4 operand)."""
    a, b = static_shape(node.inputs[0]), static_shape(node.inputs[1])
    b_const = node.inputs[1] is not None and node.inputs[1].is_constant
    if len(a) != 4 or (len(b) != 4 and not b_const):
        return ()
    return ("N", "H")


def matmul_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    if i == 0 and static_shape(node.inputs[0])[2] != 1:
        return (lo, hi)
    return None


def matmul_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    return 2.0 * math.prod(out_shape) * static_shape(node.inputs[0])[-1]


register_kernel("MatMul").split_when(matmul_split).input_slice(matmul_rows).cost(matmul_cost)
