"""Kernel of MatMul on rank-4 operands ([N, heads, rows, k] @ [N, heads, k, cols]).

The left operand's rows are the output's rows, so it tiles on N and H; the right operand is
needed whole. MatMul of other ranks and Gemm run as global layers.
"""

from __future__ import annotations

import math

from ...ir.graph import Node
from .registry import register_kernel


def matmul_split(node: Node) -> tuple[str, ...]:
    a, b = node.inputs[0].shape, node.inputs[1].shape
    if len(a) != 4 or len(b) != 4:
        return ()
    return ("N", "H") if a[0] == b[0] or b[0] == 1 else ("H",)


def matmul_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    if i == 0 and node.inputs[0].shape[2] != 1:
        return (lo, hi)
    return None


def matmul_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    return 2.0 * math.prod(out_shape) * node.inputs[0].shape[-1]


register_kernel("MatMul").split_when(matmul_split).input_slice(matmul_rows).cost(matmul_cost)
