"""Fold a per-channel Mul and Add after a Conv into the Conv's weights and bias.

``Conv(x, W, B) * s + t``, with constant ``s`` and ``t`` per output channel (or one for all),
becomes ``Conv(x, W * s, B * s + t)``, computed in float64 and cast back: Caffe's ``Scale``
layer after a ``BatchNorm`` (mapped to a Mul and, with ``bias_term``, an Add) once
``fold_batchnorm`` has folded the BatchNorm, and Caffe's ``Bias`` layer. TPU-MLIR's
``MergeScale2Conv`` does this for the chip, so the Conv's instruction runs the whole chain.

Each Mul or Add folds on its own (a Conv -> Mul -> Add folds twice); the Conv then produces the
Mul's or Add's output tensor (same name) and its own output disappears, so like
``fold_batchnorm`` the pass is opt-in (``passes=(..., "fold_scale")``). A constant that would
broadcast the output to a larger shape, varies along any axis but the channels, or is not
float, and a Conv output read by anything else or a graph output, are left alone.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from ..graph import Graph, Node, Value
from .base import PassResult, fresh_constant

_FLOATS = ("f32", "f64", "f16", "bf16")


def _per_channel(c: Value | None, out: Value, channels: int) -> np.ndarray | None:
    """``c``'s data as one float64 value per output channel (a scalar repeated), or None when
    it is not a constant of that layout."""
    if c is None or c.data is None or c.dtype not in _FLOATS or c.rank > out.rank:
        return None
    dims = (1,) * (out.rank - c.rank) + tuple(int(d) for d in c.shape)
    if any(d != 1 for i, d in enumerate(dims) if i != 1) or (out.rank > 1 and dims[1] not in (1, channels)):
        return None
    return np.broadcast_to(np.asarray(c.data, np.float64).reshape(-1), (channels,))


def _fold_one(n: Node, users: dict[int, int], outputs: set[int], fresh: set[int],
              names: set[str], constants: dict[str, Value],
              after: set[str] | None) -> tuple[Node, Node] | None:
    """(the Conv before Mul/Add node ``n``, the Conv that replaces the two), or None; a Conv
    in ``fresh`` (made in this sweep) is left for the next, and with ``after`` only a Conv
    whose output is named there folds."""
    if n.op not in ("Mul", "Add") or len(n.inputs) != 2 or any(v is None for v in n.inputs):
        return None
    for i in (0, 1):
        x, c = n.inputs[i], n.inputs[1 - i]
        conv = x.producer if x is not None else None
        if conv is None or conv.op != "Conv" or id(conv) in fresh or x is None:
            continue
        if after is not None and x.name not in after:
            continue
        if id(x) in outputs or users.get(id(x), 0) != 1:
            continue
        w = conv.inputs[1].data if conv.inputs[1] is not None else None
        has_b = len(conv.inputs) > 2 and conv.inputs[2] is not None
        b = conv.inputs[2].data if has_b and conv.inputs[2] is not None else None
        if w is None or (has_b and b is None) or n.outputs[0].shape != x.shape:
            continue
        m = int(w.shape[0])
        p = _per_channel(c, x, m)
        if p is None:
            continue
        w64, b64 = np.asarray(w, np.float64), np.zeros(m) if b is None else np.asarray(b, np.float64)
        if n.op == "Mul":
            w64, b64 = w64 * p.reshape((-1,) + (1,) * (w64.ndim - 1)), b64 * p
        else:
            b64 = b64 + p
        wv = fresh_constant(constants, names, f"{conv.name}/W_scaled", w64.astype(w.dtype), conv.inputs[1])
        bv = fresh_constant(constants, names, f"{conv.name}/B_scaled", b64.astype(w.dtype), conv.inputs[1])
        out = n.outputs[0]
        fused = Node("Conv", conv.name, [conv.inputs[0], wv, bv], [out], conv.attrs, conv.origin,
                     conv.placement)
        out.producer = fused
        return conv, fused
    return None



class FoldScaleIntoConv:
    """Rewrite every foldable Conv -> per-channel Mul / Add into one Conv (see the module).
    ``after``: fold only into the Convs producing these tensors (and the Convs those folds
    make): the outputs of the BatchNormalizations ``fold_batchnorm`` folded, for a Scale
    after a BatchNorm and no other Mul or Add."""

    name = "fold_scale"

    def __init__(self, after: Collection[str] | None = None) -> None:
        self.after = None if after is None else set(after)

    def __call__(self, graph: Graph) -> PassResult:
        changed = False
        while True:  # Conv -> Mul -> Add: the Add folds into the Conv the Mul folded into
            graph.rebuild_uses()
            users: dict[int, int] = {}
            for node in graph.nodes:
                for v in node.inputs:
                    if v is not None:
                        users[id(v)] = users.get(id(v), 0) + 1
            outputs = {id(v) for v in graph.outputs}
            names = set(graph.values()) | {nd.name for nd in graph.nodes}
            constants = dict(graph.constants)
            replace: dict[int, Node] = {}
            drop: set[int] = set()
            for node in graph.nodes:
                got = _fold_one(node, users, outputs, {id(f) for f in replace.values()}, names,
                                constants, self.after)
                if got is not None:
                    if self.after is not None:
                        self.after.add(node.outputs[0].name)
                    drop.add(id(got[0]))
                    replace[id(node)] = got[1]
            if not replace:
                break
            changed = True
            nodes = [replace.get(id(nd), nd) for nd in graph.nodes if id(nd) not in drop]
            from .dce import EliminateDeadCode

            graph = EliminateDeadCode()(Graph(graph.name, graph.inputs, graph.outputs, nodes,
                                               constants.values(), graph.registry, graph.metadata)).graph
        graph.rebuild_uses()
        return PassResult(graph, changed)
