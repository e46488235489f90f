"""Cross-layer equalisation: the per-channel weight ranges of consecutive convolutions matched.

After BatchNorm folding, the output channels of a convolution can have ranges that differ by
orders of magnitude (a depthwise convolution's channels most of all). Per-tensor int8
activations then spend their 255 levels on the widest channel and round the narrow ones
away, and per-tensor weights do the same to the weights. For ``y = W2 f(W1 x + b1)`` with
``f`` positively homogeneous (``f(x / s) = f(x) / s`` for ``s > 0``: ReLU, LeakyReLU, PReLU,
identity) output channel ``i`` of the first layer can be divided by any ``s_i > 0`` if input
channel ``i`` of the second is multiplied by it, and the float model computes the same
function. Nagel et al. ("Data-Free Quantization Through Weight Equalization and Bias
Correction", ICCV 2019, section 4.1) choose ``s_i = sqrt(r1_i / r2_i)``, with ``r1_i`` the
range (max |w|) of output channel ``i`` of W1 and ``r2_i`` that of input channel ``i`` of W2,
so that both become ``sqrt(r1_i * r2_i)``; along a chain (pointwise -> depthwise ->
pointwise) the pairs are equalised in turn, again until the scales settle (their section
4.1: "we iterate this process ... until convergence"). AIMET's ``equalize_model``, PPQ's
layerwise equalisation and TPU-MLIR's weight equalisation do the same.

Not through HardSwish, Clip(0, 6), Sigmoid or any other activation that is not positively
homogeneous: dividing the input of ``min(max(x, 0), 6)`` by ``s`` moves where it clips.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ir.passes.fuse_chain import Uses

#: Activations ``f`` with ``f(x / s) = f(x) / s`` for every ``s > 0`` (per channel for PRelu,
#: whose slope stays with its channel): a pair of convolutions is equalised through them.
HOMOGENEOUS = ("Relu", "LeakyRelu", "PRelu", "Identity")
#: Sweeps over every pair at most; the scales of a sweep are all within SETTLED of 1 sooner.
MAX_SWEEPS = 50
SETTLED = 1e-4
#: Scales are kept within [1 / LIMIT, LIMIT]: a channel whose weights are all but zero in
#: one layer would otherwise be blown up to the other's size.
LIMIT = 1e6


@dataclass
class _Pair:
    """Two convolutions whose shared channels can be rescaled: ``first``'s output channels
    are ``second``'s input channels (through ``via``, a homogeneous activation, or none)."""

    first: Node
    second: Node
    via: Node | None


def equalize(graph: Graph) -> Graph:
    """A copy of ``graph`` with every Conv -> [ReLU | LeakyReLU | PReLU | Identity] -> Conv pair
    equalised (see the module); the float function is unchanged up to rounding.
    ``graph.metadata["quant.equalized"]`` says how many pairs were."""
    from ..passcheck import clone_graph

    g = clone_graph(graph)
    pairs = equalizable_pairs(g)
    for _ in range(MAX_SWEEPS):
        if max((_equalize_pair(p) for p in pairs), default=0.0) < SETTLED:
            break
    g.metadata["quant.equalized"] = f"{len(pairs)} pairs"
    return g


def equalizable_pairs(graph: Graph) -> list[_Pair]:
    """The pairs of ``graph`` that can be equalised: a Conv with constant weights (and bias)
    whose output feeds, alone and not as a graph output, one homogeneous activation or
    directly the data input of a Conv with constant weights; every weight and bias used by
    that node alone (so rescaling it changes nothing else)."""
    uses = Uses.of(graph)
    only_reader = uses.only_reader
    pairs = []
    for first in graph.nodes:
        if not _own_weights(first, uses):
            continue
        nxt = only_reader(first.outputs[0])
        via = None
        if nxt is not None and _homogeneous(nxt):
            via, nxt = nxt, only_reader(nxt.outputs[0])
        if nxt is None or not _own_weights(nxt, uses) or nxt.inputs[0] is None:
            continue
        if nxt.inputs[0].name != (via or first).outputs[0].name:
            continue
        if _in_channels(nxt) == int(np.shape(_w(first))[0]):
            pairs.append(_Pair(first, nxt, via))
    return pairs


def _w(node: Node) -> np.ndarray:
    w = node.inputs[1]
    assert w is not None and w.data is not None
    return w.data


def _own_weights(node: Node, uses: Uses) -> bool:
    """A float Conv whose weights (and bias, if any) are constants that only it reads."""
    if node.op != "Conv" or len(node.inputs) < 2:
        return False
    consts = [v for v in node.inputs[1:3] if v is not None]
    return (all(v.is_constant and v.data is not None and v.dtype == "f32" and len(uses.readers_of(v)) == 1
                for v in consts) and node.inputs[1] is not None)


def _homogeneous(node: Node) -> bool:
    """An activation that commutes with a positive per-channel scale (PRelu with a constant
    slope: ``x / s`` keeps its sign, so each element takes the same branch)."""
    if node.op not in HOMOGENEOUS:
        return False
    slope = node.inputs[1] if node.op == "PRelu" and len(node.inputs) > 1 else None
    return node.op != "PRelu" or (slope is not None and slope.is_constant)


def _in_channels(conv: Node) -> int:
    return int(np.shape(_w(conv))[1]) * int(conv.attrs.get("group", 1) or 1)


def _grouped(conv: Node) -> np.ndarray:
    """``conv``'s weights ``[Cout, Cin/g, k...]`` viewed as ``[g, Cout/g, Cin/g, k...]``."""
    w = _w(conv)
    g = int(conv.attrs.get("group", 1) or 1)
    return w.reshape(g, w.shape[0] // g, *w.shape[1:])


def _equalize_pair(p: _Pair) -> float:
    """Rescale ``p``'s shared channels by Nagel's ``s = sqrt(r1 / r2)``; returns the largest
    ``|log s|`` (0 when the pair is equalised already)."""
    w1 = np.asarray(_w(p.first), np.float64)
    w2 = np.asarray(_grouped(p.second), np.float64)  # [g, Cout/g, Cin/g, k...]
    r1 = np.abs(w1).reshape(w1.shape[0], -1).max(axis=1)
    axes = (1, *range(3, w2.ndim))
    r2 = np.abs(w2).max(axis=axes).reshape(-1)  # [g, Cin/g] -> channel g * Cin/g + j
    ok = (r1 > 0) & (r2 > 0)
    s = np.ones_like(r1)
    s[ok] = np.clip(np.sqrt(r1[ok] / r2[ok]), 1.0 / LIMIT, LIMIT)
    change = float(np.max(np.abs(np.log(s)))) if s.size else 0.0
    if change == 0.0:
        return 0.0
    shape1 = (-1,) + (1,) * (w1.ndim - 1)
    _set(p.first.inputs[1], w1 / s.reshape(shape1))
    b = p.first.inputs[2] if len(p.first.inputs) > 2 else None
    if b is not None and b.data is not None:
        _set(b, np.asarray(b.data, np.float64) / s)
    shape2 = (w2.shape[0], 1, w2.shape[2]) + (1,) * (w2.ndim - 3)
    _set(p.second.inputs[1], (w2 * s.reshape(shape2)).reshape(_w(p.second).shape))
    return change


def _set(v: Value | None, data: np.ndarray) -> None:
    """Give constant ``v`` new data of its dtype (a new array: the copied graph shares the
    original's arrays)."""
    assert v is not None and v.data is not None
    v.data = np.ascontiguousarray(data, dtype=v.data.dtype)
