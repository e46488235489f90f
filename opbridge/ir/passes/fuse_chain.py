"""What every fusion pass shares: find chains of nodes, check they can go, splice in one node.

A fusion pass gives a ``find(node, uses)`` function that, starting at ``node``, recognises a
chain and returns a :class:`Match`: the chain's nodes and the one node replacing them. The
fused node produces the chain's last output :class:`Value` itself (same name, same users), so
graph outputs and later nodes do not change; every other tensor of the chain must be used only
inside the chain (and not be a graph output), else the match is dropped: a fusion never
duplicates work or removes a tensor something else reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..graph import Graph, Node, Origin, Value
from .base import PassResult


@dataclass
class Uses:
    """Who reads each value (by ``id``), and which values are graph outputs."""

    readers: dict[int, list[Node]]
    outputs: set[int]
    names: set[str]

    @classmethod
    def of(cls, graph: Graph) -> Uses:
        readers: dict[int, list[Node]] = {}
        for n in graph.nodes:
            for v in n.inputs:
                if v is not None:
                    readers.setdefault(id(v), []).append(n)
        return cls(readers, {id(v) for v in graph.outputs}, set(graph.values()))

    def only_reader(self, v: Value) -> Node | None:
        """The single node reading ``v`` when ``v`` has exactly one reader and is no graph output."""
        r = self.readers.get(id(v), [])
        return r[0] if len(r) == 1 and id(v) not in self.outputs else None

    def readers_of(self, v: Value) -> list[Node]:
        return self.readers.get(id(v), [])


@dataclass
class Match:
    """A chain found by a pass: its nodes (the last in graph order is where ``fused`` goes)."""

    nodes: list[Node]
    fused: Node


Finder = Callable[[Node, Uses], "Match | None"]


def scalar(v: Value | None) -> float | None:
    """The value of a one-element constant, else None."""
    if v is None or v.data is None or v.data.size != 1:
        return None
    return float(np.asarray(v.data).reshape(-1)[0])


def other_input(node: Node, v: Value) -> Value | None:
    """The input of a two-input node that is not ``v`` (None if ``v`` is not one of them)."""
    if len(node.inputs) != 2:
        return None
    a, b = node.inputs
    if a is v:
        return b
    if b is v:
        return a
    return None


def fused_node(op: str, anchor: Node, inputs: list[Value | None], output: Value,
               attrs: dict) -> Node:
    """A node named and originated like ``anchor`` (the chain's defining node) producing ``output``."""
    origin = Origin(anchor.origin.framework, anchor.origin.op_type, anchor.origin.name)
    return Node(op, anchor.name, inputs, [output], attrs, origin, anchor.placement)


def _closed(m: Match, uses: Uses) -> bool:
    """Every tensor of the chain but the fused node's output is read only inside the chain."""
    inside = {id(n) for n in m.nodes}
    keep = id(m.fused.outputs[0])
    if any(n.placement != m.nodes[0].placement for n in m.nodes):
        return False
    for n in m.nodes:
        for v in n.outputs:
            if id(v) == keep:
                continue
            if id(v) in uses.outputs or any(id(r) not in inside for r in uses.readers_of(v)):
                return False
    return any(id(v) == keep for n in m.nodes for v in n.outputs)


def apply_matches(graph: Graph, find: Finder) -> PassResult:
    """Run ``find`` from every node (in order), splice in every closed, non-overlapping match."""
    uses = Uses.of(graph)
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    taken: set[int] = set()
    at: dict[int, Node] = {}
    for node in graph.nodes:
        if id(node) in taken:
            continue
        m = find(node, uses)
        if m is None or any(id(n) in taken for n in m.nodes) or not _closed(m, uses):
            continue
        taken.update(id(n) for n in m.nodes)
        at[id(max(m.nodes, key=lambda n: order[id(n)]))] = m.fused
    if not at:
        return PassResult(graph, False)
    nodes = [at.get(id(n), n) for n in graph.nodes if id(n) not in taken or id(n) in at]
    constants = dict(graph.constants)
    for f in at.values():
        constants.update((v.name, v) for v in f.inputs if v is not None and v.data is not None)
    g = Graph(graph.name, graph.inputs, graph.outputs, nodes, constants.values(),
              graph.registry, graph.metadata)
    from .dce import EliminateDeadCode

    g = EliminateDeadCode()(g).graph  # constants only the chain read (e.g. GELU's 0.5)
    g.rebuild_uses()
    return PassResult(g, True)


def new_constant(uses: Uses, base: str, data: np.ndarray, dtype: str) -> Value:
    """A constant for a fused node, under a fresh name starting with ``base``; it joins the
    graph's constants only if the match is spliced in."""
    name, i = base, 0
    while name in uses.names:
        i += 1
        name = f"{base}_{i}"
    uses.names.add(name)
    return Value(name, dtype, data.shape, data=data)
