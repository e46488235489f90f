"""The pass contract: a pass has a ``name`` and maps a Graph to a PassResult.

A pass returns the (possibly new) graph and whether it modified anything; it never leaves the
graph unverifiable. :func:`run_passes` runs a list of passes and verifies the result.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ...errors import OpbridgeError
from ..graph import Graph, Value


class PassError(OpbridgeError, RuntimeError):
    """A graph pass failed (a plugin's pass raised, or returned something that is not a graph)."""


@dataclass
class PassResult:
    """What a pass gives back: the graph, whether the pass changed it, and optionally one line
    saying what it did (``"fuse_ffn: 2 match(es) of MatMul -> Add -> ... -> FusedFFN"``)."""

    graph: Graph
    modified: bool
    detail: str = ""


def fresh_constant(constants: dict[str, Value], names: set[str], base: str, data: np.ndarray,
                   like: Value | None) -> Value:
    """A new constant named ``base`` (or ``base_1``, ``base_2``, ... if taken), with ``like``'s
    dtype (f32 without one), added to ``constants`` and its name to ``names``: how a folding pass
    adds the rewritten weights it makes."""
    name, i = base, 0
    while name in names:
        i += 1
        name = f"{base}_{i}"
    names.add(name)
    v = Value(name, like.dtype if like is not None else "f32", data.shape, data=data)
    constants[name] = v
    return v


class GraphPass(Protocol):
    """A graph-to-graph transformation with a name (used in messages and in ``passes=``)."""

    name: str

    def __call__(self, graph: Graph) -> PassResult: ...


def run_passes(graph: Graph, passes: Iterable[GraphPass], *, verify: bool = True) -> Graph:
    """Run ``passes`` in order; verifies the final graph when any pass modified it."""
    modified = False
    for p in passes:
        result = run_one(p, graph)
        graph = result.graph
        modified |= result.modified
    if verify and modified:
        graph.verify(require_static=False)  # a pass keeps the dims it was given
    return graph


def run_one(p: GraphPass, graph: Graph) -> PassResult:
    """Run one pass; an exception that is not an OpbridgeError becomes a PassError naming it."""
    name = getattr(p, "name", type(p).__name__)
    try:
        result = p(graph)
    except OpbridgeError:
        raise
    except Exception as err:
        raise PassError(f"pass '{name}' failed: {type(err).__name__}: {err}",
                        hint="fix the pass (a plugin's register_pass function)") from err
    if not isinstance(result, PassResult):
        raise PassError(f"pass '{name}' returned a {type(result).__name__}, not a PassResult",
                        hint="register plain functions with opbridge.register_pass, which accepts "
                             "a Graph or None as their result")
    return result
