"""Fold an inference BatchNormalization into the Conv that feeds it (a many-to-one rewrite).

``BN(Conv(x, W, B))`` with constant W, B, scale, bias, mean and var becomes
``Conv(x, W * s, (B - mean) * s + bias)`` with ``s = scale / sqrt(var + epsilon)`` per output
channel, computed in float64 and cast back. The fused Conv produces the BatchNormalization's
output tensor (same name), so graph outputs and the BN's name survive; the Conv's own output
tensor disappears, which is why this pass is opt-in (``passes=(..., "fold_batchnorm")``): it
removes a tensor that layer-by-layer validation could otherwise compare by name.

Conv + activation fusion is deliberately absent: it would remove the Conv's output tensor in
every network (and the IR has no fused op), breaking name matching for no gain in the
reference interpreter; the simulator fuses at lowering time instead.
"""

from __future__ import annotations

import numpy as np

from ..graph import Graph, Node, Origin, Value
from .base import PassResult, fresh_constant
from .fuse_chain import Uses


def _const(v: Value | None) -> np.ndarray | None:
    return None if v is None else v.data


class FoldBatchNormIntoConv:
    """Rewrite every foldable Conv -> BatchNormalization pair into one Conv."""

    name = "fold_batchnorm"

    def __call__(self, graph: Graph) -> PassResult:
        uses = Uses.of(graph)
        replace: dict[int, Node] = {}  # id(bn node) -> fused conv
        drop: set[int] = set()
        constants = dict(graph.constants)
        for bn in graph.nodes:
            if bn.op != "BatchNormalization" or bn.inputs[0] is None:
                continue
            conv = bn.inputs[0].producer
            if conv is None or conv.op != "Conv" or id(conv) in drop:
                continue
            if uses.only_reader(conv.outputs[0]) is not bn:  # the Conv's output goes away
                continue
            w = _const(conv.inputs[1])
            b = _const(conv.inputs[2]) if len(conv.inputs) > 2 else None
            if w is None or (len(conv.inputs) > 2 and conv.inputs[2] is not None and b is None):
                continue
            params = [_const(v) for v in bn.inputs[1:5]]
            if any(p is None for p in params):
                continue
            scale, beta, mean, var = (np.asarray(p, np.float64) for p in params)  # type: ignore[arg-type]
            s = scale / np.sqrt(var + float(bn.attrs["epsilon"]))
            w64 = np.asarray(w, np.float64)
            new_w = (w64 * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
            b64 = np.zeros(w.shape[0]) if b is None else np.asarray(b, np.float64)
            new_b = ((b64 - mean) * s + beta).astype(w.dtype)
            wv = fresh_constant(constants, uses.names, f"{conv.name}/W_bn", new_w, conv.inputs[1])
            bv = fresh_constant(constants, uses.names, f"{conv.name}/B_bn", new_b, conv.inputs[1])
            out = bn.outputs[0]
            fused = Node("Conv", conv.name, [conv.inputs[0], wv, bv], [out], conv.attrs,
                         Origin(conv.origin.framework, conv.origin.op_type, conv.origin.name),
                         conv.placement)
            out.producer = fused
            replace[id(bn)] = fused
            drop.add(id(conv))
        if not replace:
            return PassResult(graph, False)
        nodes = []
        for n in graph.nodes:
            if id(n) in drop:
                continue
            nodes.append(replace.get(id(n), n))
        g = Graph(graph.name, graph.inputs, graph.outputs, nodes, constants.values(), graph.registry,
                  graph.metadata)
        from .dce import EliminateDeadCode

        g = EliminateDeadCode()(g).graph
        g.rebuild_uses()
        return PassResult(g, True)
