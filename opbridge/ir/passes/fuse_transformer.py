"""Fuse the transformer patterns exporters spell out op by op into single IR ops.

What ``torch.onnx.export`` writes for a BERT encoder (opsets below 17/20), and what each
becomes:

- ``fuse_layernorm``: ``ReduceMean -> Sub -> Pow(2) -> ReduceMean -> Add(eps) -> Sqrt -> Div
  -> Mul(gamma) [-> Add(beta)]`` over the trailing axes -> ``LayerNormalization``;
- ``fuse_gelu``: ``x * 0.5 * (1 + Erf(x / sqrt(2)))`` in either order of the two Muls (and
  ``x * (1/sqrt(2))`` for the Div) -> ``Gelu`` (approximate='none');
- ``fuse_attention``: ``MatMul(Q, K_T) -> Div(c) or Mul(c) [-> Add(mask)] -> Softmax(last
  axis) -> MatMul(., V)`` -> ``ScaledDotProductAttention`` (scale = 1/c or c).

Each rewrite keeps the pattern's final tensor (and its name); the tensors inside the pattern
go. See :mod:`.fuse_chain` for the rules every fusion follows.
"""

from __future__ import annotations

import math

import numpy as np

from ..graph import Graph, Node, Value
from ..ops.common import FLOATS
from .base import PassResult
from .fuse_chain import Match, Uses, apply_matches, fused_node, other_input, scalar


def _near(x: float | None, want: float, tol: float = 1e-3) -> bool:
    return x is not None and abs(x - want) <= tol * abs(want)


def _reader(v: Value, uses: Uses, op: str) -> Node | None:
    r = uses.only_reader(v)
    return r if r is not None and r.op == op else None


def _trailing_axes(node: Node, rank: int) -> int | None:
    """The first axis of a keepdims ReduceMean over trailing axes ``[a, rank)``, else None."""
    if node.attrs.get("keepdims") != 1 or not node.attrs.get("axes"):
        return None
    axes = sorted(a % rank for a in node.attrs["axes"])
    return axes[0] if axes == list(range(axes[0], rank)) else None


def _broadcasts_to_tail(v: Value, tail: tuple) -> bool:
    s = tuple(v.shape)
    return len(s) <= len(tail) and all(a in (1, b) for a, b in zip(s[::-1], tail[::-1]))


def _ln_variance(d: Value, uses: Uses, x_rank: int, axis: int) -> tuple[list[Node], float, Node] | None:
    """From ``d = x - mean``: Pow(d, 2) -> ReduceMean -> Add(eps) -> Sqrt -> Div(d, .)."""
    rs = uses.readers_of(d)
    if len(rs) != 2 or id(d) in uses.outputs:
        return None
    sq = next((r for r in rs if r.op == "Pow" and r.inputs[0] is d and _near(scalar(r.inputs[1]), 2.0)
               or r.op == "Mul" and r.inputs[0] is d and r.inputs[1] is d), None)
    div = next((r for r in rs if r.op == "Div" and r.inputs[0] is d), None)
    if sq is None or div is None:
        return None
    var = _reader(sq.outputs[0], uses, "ReduceMean")
    if var is None or _trailing_axes(var, x_rank) != axis:
        return None
    add = _reader(var.outputs[0], uses, "Add")
    eps = scalar(other_input(add, var.outputs[0])) if add is not None else None
    sqrt = _reader(add.outputs[0], uses, "Sqrt") if add is not None and eps is not None else None
    if sqrt is None or eps is None or div.inputs[1] is not sqrt.outputs[0]:
        return None
    return [sq, var, add, sqrt, div], eps, div  # type: ignore[list-item]


def _find_layernorm(node: Node, uses: Uses) -> Match | None:
    if node.op != "ReduceMean" or node.inputs[0] is None or node.outputs[0].dtype not in FLOATS:
        return None
    x = node.inputs[0]
    axis = _trailing_axes(node, len(x.shape))
    sub = _reader(node.outputs[0], uses, "Sub")
    if axis is None or sub is None or sub.inputs[0] is not x or sub.inputs[1] is not node.outputs[0]:
        return None
    found = _ln_variance(sub.outputs[0], uses, len(x.shape), axis)
    if found is None:
        return None
    var_nodes, eps, div = found
    tail = tuple(x.shape[axis:])
    mul = _reader(div.outputs[0], uses, "Mul")
    gamma = other_input(mul, div.outputs[0]) if mul is not None else None
    if mul is None or gamma is None or gamma.data is None or not _broadcasts_to_tail(gamma, tail):
        return None
    chain = [node, sub, *var_nodes, mul]
    last, beta = mul.outputs[0], None
    add = _reader(last, uses, "Add")
    b = other_input(add, last) if add is not None else None
    if add is not None and b is not None and b.data is not None and _broadcasts_to_tail(b, tail):
        chain.append(add)
        last, beta = add.outputs[0], b
    if last.shape != x.shape:
        return None
    attrs = {"axis": axis, "epsilon": eps, "output_stats": False}
    return Match(chain, fused_node("LayerNormalization", node, [x, gamma, beta], last, attrs))


class FuseLayerNorm:
    """The op-by-op layer normalisation of exported transformers -> LayerNormalization."""

    name = "fuse_layernorm"

    def __call__(self, graph: Graph) -> PassResult:
        return apply_matches(graph, _find_layernorm)


def _gelu_tail(x: Value, a: Value, uses: Uses) -> list[Node] | None:
    """From ``a = 1 + erf(.)``: ``Mul(x, a) -> Mul(., 0.5)`` or ``Mul(Mul(x, 0.5), a)``."""
    m = _reader(a, uses, "Mul")
    other = other_input(m, a) if m is not None else None
    if m is None or other is None:
        return None
    if other is x:
        half = _reader(m.outputs[0], uses, "Mul")
        if half is not None and _near(scalar(other_input(half, m.outputs[0])), 0.5):
            return [m, half]
        return None
    h = other.producer
    if (h is not None and h.op == "Mul" and other_input(h, x) is not None
            and _near(scalar(other_input(h, x)), 0.5)):
        return [h, m]
    return None


def _find_gelu(node: Node, uses: Uses) -> Match | None:
    if node.op not in ("Div", "Mul") or node.inputs[0] is None:
        return None
    x, c = node.inputs[0], scalar(node.inputs[1])
    if x.dtype not in FLOATS or not (
            node.op == "Div" and _near(c, math.sqrt(2.0)) or node.op == "Mul" and _near(c, math.sqrt(0.5))):
        return None
    erf = _reader(node.outputs[0], uses, "Erf")
    add = _reader(erf.outputs[0], uses, "Add") if erf is not None else None
    if erf is None or add is None or not _near(scalar(other_input(add, erf.outputs[0])), 1.0):
        return None
    tail = _gelu_tail(x, add.outputs[0], uses)
    if tail is None or tail[-1].outputs[0].shape != x.shape:
        return None
    return Match([node, erf, add, *tail],
                 fused_node("Gelu", node, [x], tail[-1].outputs[0], {"approximate": "none"}))


class FuseGelu:
    """The erf form of GELU, spelt out -> Gelu."""

    name = "fuse_gelu"

    def __call__(self, graph: Graph) -> PassResult:
        return apply_matches(graph, _find_gelu)


def _find_attention(node: Node, uses: Uses) -> Match | None:
    if node.op != "MatMul" or any(v is None or v.is_constant for v in node.inputs):
        return None
    q, kt = node.inputs
    scores = node.outputs[0]
    if scores.dtype not in FLOATS or len(scores.shape) < 2:
        return None
    chain = [node]
    last, scale = scores, 1.0
    r = uses.only_reader(last)
    c = scalar(other_input(r, last)) if r is not None and r.op in ("Div", "Mul") else None
    if r is not None and c is not None and (r.op == "Mul" or r.inputs[0] is last) and c != 0.0:
        scale = 1.0 / c if r.op == "Div" else c
        chain.append(r)
        last = r.outputs[0]
    mask = None
    add = _reader(last, uses, "Add")
    if add is not None and add.outputs[0].shape == last.shape:
        mask = other_input(add, last)
        chain.append(add)
        last = add.outputs[0]
    sm = _reader(last, uses, "Softmax")
    if sm is None or sm.attrs["axis"] % len(last.shape) != len(last.shape) - 1:
        return None
    mm = _reader(sm.outputs[0], uses, "MatMul")
    if mm is None or mm.inputs[0] is not sm.outputs[0] or mm.inputs[1] is None:
        return None
    chain += [sm, mm]
    attrs = {"scale": float(np.float32(scale))}
    return Match(chain, fused_node("ScaledDotProductAttention", node, [q, kt, mm.inputs[1], mask],
                                   mm.outputs[0], attrs))


class FuseAttention:
    """Scaled dot-product attention, spelt out -> ScaledDotProductAttention."""

    name = "fuse_attention"

    def __call__(self, graph: Graph) -> PassResult:
        return apply_matches(graph, _find_attention)
