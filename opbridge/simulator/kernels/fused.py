"""Kernels of the fused ops (``opbridge/ir/ops/fused.py``).

FusedConv tiles exactly as Conv does (same halo, same channel chunks, same cost plus one
operation per output element for the activation), adds its ``Z`` (taken at the output
tile's rows and columns) and applies its activation to the output tile in place; one with a
``Z`` is not computed in chunks of output channels. FusedMatMul tiles as MatMul does (rows of
A; its weight and bias resident or streamed in chunks of output features), writing straight
into its output tile. ScaledDotProductAttention tiles along the query rows (N and H of Q):
K_T and V are read whole, a mask with a row per query at the tile's rows; its scores for the
tile live in a scratch buffer (heads over lanes, as the tile). Their cost is their matmuls'
FLOPs.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir.graph import Node
from ...ir.opdef import DEFAULT_OPS
from ...ir.ops.fused import apply_activation
from .conv import conv2d_into, conv_channels, conv_cost, conv_rows, conv_split, conv_tile_attrs
from .matmul import matmul_rows, matmul_split, weight_features
from .registry import register_kernel, static_shape


def fused_conv_into(out: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
                    z: np.ndarray | None = None, *, activation: str,
                    activation_params: tuple[float, ...], **conv: object) -> None:
    conv2d_into(out, x, w, b, **conv)  # type: ignore[arg-type]
    if z is not None:
        out += z
    if activation != "none":
        res = apply_activation(out, activation, tuple(activation_params))
        if res is not out:
            out[...] = res


def fused_matmul_into(out: np.ndarray, a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None,
                      *, activation: str, activation_params: tuple[float, ...]) -> None:
    """FusedMatMul straight into its output: one GEMM over every row, then bias and
    activation in place (f32; other dtypes go through the op's compute)."""
    if not (a.dtype == b.dtype == out.dtype == np.float32 and out.flags.c_contiguous
            and a.shape[-1] == b.shape[0]):
        fn = DEFAULT_OPS.get("FusedMatMul").compute_function
        assert fn is not None  # the built-in FusedMatMul has one
        out[...] = fn(a, b, bias, activation=activation, activation_params=activation_params)
        return
    y = out.reshape(-1, b.shape[1])
    np.matmul(a.reshape(-1, a.shape[-1]), b, out=y)
    if bias is not None:
        y += bias
    res = apply_activation(y, activation, tuple(activation_params))
    if res is not y:
        y[...] = res


def _fused_conv_split(node: Node) -> tuple[str, ...]:
    axes = conv_split(node)
    return tuple(a for a in axes if a != "C") if len(node.inputs) > 3 and node.inputs[3] else axes


def _fused_conv_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    """Z (input 3) is read at the output tile's own rows; the rest as Conv."""
    return (lo, hi) if i == 3 else conv_rows(node, i, lo, hi)


def _fused_conv_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    return conv_cost(node, out_shape) + math.prod(out_shape)


def _fused_matmul_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    return 2.0 * math.prod(out_shape) * static_shape(node.inputs[0])[-1]


def _sdpa_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    q, kt = static_shape(node.inputs[0]), static_shape(node.inputs[1])
    scores = math.prod(out_shape[:-1]) * kt[-1]  # the tile's query rows (all of them globally)
    return 2.0 * scores * q[-1] + 2.0 * scores * out_shape[-1] + 5.0 * scores


(
    register_kernel("FusedConv")
    .split_when(_fused_conv_split)
    .input_slice(_fused_conv_rows)
    .channel_slice(conv_channels)
    .tile_attrs(conv_tile_attrs)
    .cost(_fused_conv_cost)
    .volumes()
    .compute_into(fused_conv_into)
    .weight_memo()
)


def _sdpa_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, int] | None:
    """Query rows [lo, hi) read those rows of Q and of a mask with a row per query; K_T and
    V whole."""
    v = node.inputs[i]
    if i == 0:
        return (lo, hi)
    if i == 3 and v is not None:
        m, q = static_shape(v), static_shape(node.inputs[0])
        if len(m) >= 2 and m[-2] == q[-2] != 1:
            return (lo, hi)
    return None


def _sdpa_split(node: Node) -> tuple[str, ...] | None:
    return ("N", "H") if all(v is None or len(static_shape(v)) == 4 for v in node.inputs) else None


def _sdpa_scratch(node: Node, out_shape: tuple[int, ...]) -> int:
    """The tile's scores [n, heads, rows, keys] in f32."""
    keys = static_shape(node.inputs[1])[-1]
    return 4 * math.prod(out_shape[:-1]) * keys


(
    register_kernel("FusedMatMul")
    .split_when(matmul_split)
    .input_slice(matmul_rows)
    .feature_slice(weight_features)
    .row_layout()
    .cost(_fused_matmul_cost)
    .compute_into(fused_matmul_into)
)
(
    register_kernel("ScaledDotProductAttention")
    .split_when(_sdpa_split)
    .input_slice(_sdpa_rows)
    .scratch(_sdpa_scratch, per="tile")
    .cost(_sdpa_cost)
)
