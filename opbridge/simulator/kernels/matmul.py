"""Kernels of MatMul and Gemm: tiled along the rows of the left operand.

On rank-4 operands ([N, heads, rows, k] @ [N, heads, k, cols]) the left operand's rows are the
output's rows, so it tiles on N and H; the right operand (a rank-4 tensor, or a constant
weight of any rank) is needed whole.

On rank-2/3 activations ([batch, tokens, k] @ a constant weight [k, features], a transformer's
linear layers) the layer group holds the activations in the row layout (tokens over lanes,
features along the EU, ``memory.row_lane_bytes``) and tiles the tokens; the weight is resident
in local memory, or, when it does not fit, streams through it in chunks of output features
(``feature_slice``: each chunk of columns of the weight, and of the bias, loaded again for
every row tile). Gemm joins a group when A is not transposed and C is a bias per feature.
"""

from __future__ import annotations

import math

from ...ir.graph import Node
from .registry import register_kernel, static_shape


def matmul_split(node: Node) -> tuple[str, ...] | None:
    """Rows of A tile freely; B is taken whole (a constant weight, or a rank-4 operand); any
    other MatMul is a global layer."""
    a, b = static_shape(node.inputs[0]), static_shape(node.inputs[1])
    b_const = node.inputs[1] is not None and node.inputs[1].is_constant
    if len(a) == 4:
        return ("N", "H") if len(b) == 4 or b_const else None
    if len(a) in (2, 3) and b_const and len(b) == 2 and _rows(node) > 1:
        return ("N", "H")
    return None


def _rows(node: Node) -> int:
    """The output's rows, its leading dimensions flattened. A single row (a CNN's classifier,
    [1, K] @ [K, N]) stays a global layer: in the row layout it would keep one lane of all busy,
    where the chip's fully-connected layer spreads the weight's columns over the lanes."""
    return math.prod(static_shape(node.outputs[0])[:-1])


def matmul_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    """Output rows [lo, hi) read the same rows of A (of its rank-4 view) and all of B."""
    a = static_shape(node.inputs[0])
    if i == 0 and (a[-2] if len(a) > 1 else 1) != 1:
        return (lo, hi)
    return None


def weight_features(node: Node, i: int, f0: int, f1: int) -> tuple[int, int, int] | None:
    """Output features [f0, f1) read columns [f0, f1) of a 2-D constant weight B [K, N]
    (rows of B when Gemm transposes it) and of a bias [N] (or [1, N])."""
    v = node.inputs[i]
    if v is None or not v.is_constant:
        return None
    shp = static_shape(v)
    if i == 1 and len(shp) == 2:
        return (0, f0, f1) if node.attrs.get("transB", 0) else (1, f0, f1)
    n = static_shape(node.outputs[0])[-1]
    if i == 2 and len(shp) >= 1 and shp[-1] == n and n > 1 and math.prod(shp) == n:
        return (len(shp) - 1, f0, f1)
    return None


def gemm_split(node: Node) -> tuple[str, ...] | None:
    """Gemm on a tile of rows of A: A not transposed, B a constant, C absent or per feature."""
    b = node.inputs[1]
    if node.attrs["transA"] or b is None or not b.is_constant or _rows(node) == 1:
        return None
    c = node.inputs[2] if len(node.inputs) > 2 else None
    n = static_shape(node.outputs[0])[-1]
    if c is not None and (not c.is_constant or math.prod(static_shape(c)) not in (1, n)
                          or (len(static_shape(c)) == 2 and static_shape(c)[0] != 1)):
        return None
    return ("H",)


def gemm_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    return (lo, hi) if i == 0 else None


def matmul_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    return 2.0 * math.prod(out_shape) * static_shape(node.inputs[0])[-1]


(register_kernel("MatMul").split_when(matmul_split).input_slice(matmul_rows)
 .feature_slice(weight_features).cost(matmul_cost).row_layout())
(register_kernel("Gemm").split_when(gemm_split).input_slice(gemm_rows)
 .feature_slice(weight_features).cost(matmul_cost).row_layout())
