"""The pass contract: a pass has a ``name`` and maps a Graph to a PassResult.

A pass returns the (possibly new) graph and whether it modified anything; it never leaves the
graph unverifiable. :func:`run_passes` runs a list of passes and verifies the result.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from ..graph import Graph


@dataclass
class PassResult:
    """What a pass gives back: the graph, and whether the pass changed it."""

    graph: Graph
    modified: bool


class GraphPass(Protocol):
    """A graph-to-graph transformation with a name (used in messages and in ``passes=``)."""

    name: str

    def __call__(self, graph: Graph) -> PassResult: ...


def run_passes(graph: Graph, passes: Iterable[GraphPass], *, verify: bool = True) -> Graph:
    """Run ``passes`` in order; verifies the final graph when any pass modified it."""
    modified = False
    for p in passes:
        result = p(graph)
        graph = result.graph
        modified |= result.modified
    if verify and modified:
        graph.verify()
    return graph
