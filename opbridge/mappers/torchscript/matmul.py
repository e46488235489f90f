"""Matrix products (linear, matmul, mm, bmm, addmm, baddbmm, einsum) and
``scaled_dot_product_attention``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ir.graph import Value
from ...ir.types import to_numpy_dtype
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, static_shape, ts_mapping


def _swap_last(g: MapContext, x: Value) -> Value:
    rank = len(x.shape)
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return g.op("Transpose", [x], perm=perm)


def _scaled(a: Args, x: Value, factor: Any) -> Value:
    f = float(factor)
    return x if f == 1.0 else a.g.op("Mul", [x, a.scalar_value(f, like=x)])


@ts_mapping("linear")
def linear(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x, w = a.tensor(0), a.tensor(1)
    b = a.optional_tensor(2)
    if len(x.shape) == 2 and len(w.shape) == 2:
        return g.op("Gemm", [x, w, b], transB=1)
    y = g.op("MatMul", [x, _swap_last(g, w) if len(w.shape) == 2 else w])
    return y if b is None else g.op("Add", [y, b])


@ts_mapping("matmul", "mm", "bmm")
def matmul(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return g.op("MatMul", [a.tensor(0), a.tensor(1)])


@ts_mapping("addmm", "baddbmm", "addbmm")
def addmm(node: OriginNode, g: MapContext) -> Any:
    # (self, mat1, mat2, *, beta=1, alpha=1): beta * self + alpha * (mat1 @ mat2)
    a = Args(node, g)
    c, m1, m2 = a.tensor(0), a.tensor(1), a.tensor(2)
    beta, alpha = a.py(3, 1), a.py(4, 1)
    if node.op_type == "addmm" and len(m1.shape) == 2:
        return g.op("Gemm", [m1, m2, c], alpha=float(alpha), beta=float(beta))
    prod = g.op("MatMul", [m1, m2])
    if node.op_type == "addbmm":
        prod = g.op("ReduceSum", [prod], axes=[0], keepdims=0)
    return g.op("Add", [_scaled(a, c, beta), _scaled(a, prod, alpha)])


@ts_mapping("einsum")
def einsum(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return g.op("Einsum", a.tensor_list(1, "operands"), equation=a.py(0).replace(" ", ""))


@ts_mapping("scaled_dot_product_attention")
def sdpa(node: OriginNode, g: MapContext) -> Any:
    # (query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False)
    a = Args(node, g)
    q, k, v = a.tensor(0), a.tensor(1), a.tensor(2)
    if float(a.py(4, 0.0) or 0.0) != 0.0:
        raise g.unsupported("dropout_p != 0 in scaled_dot_product_attention",
                            hint="export in eval mode with dropout_p=0")
    qs, ks = static_shape(g, q), static_shape(g, k)
    if a.py(7, False) and qs[-3] != ks[-3]:
        raise g.unsupported("grouped-query attention (enable_gqa with fewer key heads)",
                            hint="repeat the key and value heads to the query heads first "
                                 "(k.repeat_interleave(hq // hk, dim=-3)) and call it without enable_gqa")
    scale = a.py(6) if not a.is_none(6) else 1.0 / math.sqrt(qs[-1])
    scores = g.op("MatMul", [q, _swap_last(g, k)])
    scores = _scaled(a, scores, scale)
    np_dt = to_numpy_dtype(scores.dtype)
    if a.py(5, False):
        keep = np.tril(np.ones((qs[-2], ks[-2]), dtype=bool))
        scores = g.op("Add", [scores, g.constant(np.where(keep, 0.0, -np.inf).astype(np_dt))])
    if not a.is_none(3):
        mask = a.tensor(3)
        if mask.dtype == "bool":
            zero = g.constant(np.zeros((), dtype=np_dt))
            ninf = g.constant(np.full((), -np.inf, dtype=np_dt))
            mask = g.op("Where", [mask, zero, ninf])
        scores = g.op("Add", [scores, mask])
    return g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
