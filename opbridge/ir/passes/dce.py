"""Dead-code elimination: drop nodes and constants that no graph output depends on."""

from __future__ import annotations

from ..graph import Graph
from .base import PassResult


class EliminateDeadCode:
    """Keep only the nodes and constants that graph outputs reach (graph inputs always stay)."""

    name = "dead_code"

    def __call__(self, graph: Graph) -> PassResult:
        live: set[int] = {id(v) for v in graph.outputs}
        kept = []
        for node in reversed(graph.nodes):
            if any(id(v) in live for v in node.outputs):
                kept.append(node)
                live.update(id(v) for v in node.inputs if v is not None)
        kept.reverse()
        consts = [c for c in graph.constants.values() if id(c) in live]
        if len(kept) == len(graph.nodes) and len(consts) == len(graph.constants):
            return PassResult(graph, False)
        g = Graph(graph.name, graph.inputs, graph.outputs, kept, consts, graph.registry,
                  graph.metadata)
        g.rebuild_uses()
        return PassResult(g, True)
