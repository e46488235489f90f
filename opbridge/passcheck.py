"""Checking graph passes against the graph they rewrote.

A fusion pass replaces several ops by one whose compute someone wrote by hand; this module
says whether the result still computes what the unfused graph computed. :func:`check_passes`
runs the passes one at a time, interprets the graph before any of them and after each one on
the same inputs (random, seeded, unless given), and compares every tensor the two graphs
still share by name (the graph outputs always; a fused op's output keeps the name of the
tensor it replaces) with the metrics and per-dtype tolerances of ``opbridge validate``. The
first pass after which a tensor differs is named, with the tensor, the op that now makes it,
and the numbers.

``ob.convert(..., passes=[...], check_passes=True)`` and ``opbridge convert --pass NAME
--check-passes`` use it; ``ob.validate(..., passes=[...])`` compares the rewritten graph with
the origin framework running the unfused model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import OpbridgeError
from .ir.graph import Graph, Node, Value
from .ir.passes import GraphPass, make_passes
from .ir.passes.base import run_one


class PassCheckError(OpbridgeError, ValueError):
    """A pass changed what the graph computes (``check`` holds the whole :class:`PassCheck`)."""

    check: PassCheck


@dataclass
class StepCheck:
    """One pass: what it did, and how the graph after it compares with the graph before all."""

    name: str
    detail: str
    modified: bool
    nodes_before: int
    nodes_after: int
    compared: int = 0
    worst_cosine: float = 1.0
    max_abs: float = 0.0
    #: (tensor, node that makes it now, op, why it differs) of each tensor out of tolerance
    failures: list[tuple[str, str, str, str]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def line(self) -> str:
        """One line for the CLI: what the pass did and how it compares."""
        what = f"{self.name}: " + (self.detail or ("changed the graph" if self.modified else "no change"))
        if not self.modified:
            return f"pass {what}"
        nums = (f"{self.nodes_before} -> {self.nodes_after} nodes; {self.compared} tensor(s) compared "
                f"with the graph before the passes: worst cosine {self.worst_cosine:.6f}, max abs "
                f"err {self.max_abs:.3g}")
        if self.passed:
            return f"pass {what}; {nums}: ok"
        tensor, node, op, why = self.failures[0]
        return f"pass {what}; {nums}: DIFFERS at '{tensor}' ({op}, node '{node}'): {why}"


@dataclass
class PassCheck:
    """The outcome of :func:`check_passes`: one :class:`StepCheck` per pass, and the inputs."""

    steps: list[StepCheck]
    inputs: dict[str, str]

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.steps)

    @property
    def first_failure(self) -> StepCheck | None:
        return next((s for s in self.steps if not s.passed), None)

    def lines(self) -> list[str]:
        return [s.line() for s in self.steps]

    def add_to(self, report: Any) -> None:
        """Put the check into a validation report: a note per pass that changed the graph, and
        an error (the report then fails) for a pass that changed a result."""
        report.notes[:0] = [line for line in self.lines() if not line.endswith("no change")]
        step = self.first_failure
        if step is not None:
            tensor, node, op, why = step.failures[0]
            report.errors.append(f"pass '{step.name}' changed what the graph computes: tensor "
                                 f"'{tensor}' ({op}, node '{node}'): {why}")


def clone_graph(graph: Graph) -> Graph:
    """A copy of ``graph`` with its own Values and Nodes (constant data is shared, not copied):
    passes may change a graph's values in place, and the check keeps the original to compare."""
    vmap: dict[int, Value] = {}

    def cp(v: Value) -> Value:
        if id(v) not in vmap:
            vmap[id(v)] = Value(v.name, v.dtype, v.shape, data=v.data, kind=v.kind)
        return vmap[id(v)]

    nodes = [Node(n.op, n.name, [cp(v) if v is not None else None for v in n.inputs],
                  [cp(v) for v in n.outputs], dict(n.attrs), n.origin, n.placement)
             for n in graph.nodes]
    g = Graph(graph.name, [cp(v) for v in graph.inputs], [cp(v) for v in graph.outputs], nodes,
              [cp(c) for c in graph.constants.values()], graph.registry, graph.metadata)
    g.rebuild_uses()
    return g


def _run(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    from .ir.interpret import interpret

    return interpret(graph, feeds, keep_intermediates=True)


def _compare_step(step: StepCheck, graph: Graph, ref: Mapping[str, np.ndarray],
                  got: Mapping[str, np.ndarray], tolerance: tuple[float, float] | None) -> None:
    from .validate.compare import compare, tolerance_for

    inputs = {v.name for v in graph.inputs}
    for node in graph.nodes:
        for v in node.outputs:
            if v.name in inputs or v.name not in ref or v.name not in got:
                continue
            res = compare(ref[v.name], got[v.name], tolerance_for(v.dtype, tolerance))
            step.compared += 1
            if not math.isnan(res.cosine):
                step.worst_cosine = min(step.worst_cosine, res.cosine)
            if not math.isnan(res.max_abs):
                step.max_abs = max(step.max_abs, res.max_abs)
            if not res.passed:
                why = res.reason or f"cosine {res.cosine:.6f}, max abs err {res.max_abs:.3g}"
                step.failures.append((v.name, node.name, node.op, why))


def check_passes(
    graph: Graph,
    passes: Iterable[str | GraphPass],
    *,
    feeds: Mapping[str, Any] | None = None,
    seed: int = 0,
    tolerance: tuple[float, float] | None = None,
) -> tuple[Graph, PassCheck]:
    """Run ``passes`` on ``graph`` one by one, checking each result against ``graph`` as it was.

    ``feeds`` are the inputs (random, from ``seed``, for those not given); ``tolerance`` is
    ``(cosine, euclid)`` over the per-dtype defaults of ``opbridge validate``. Returns the
    rewritten (verified) graph and the :class:`PassCheck`; does not raise on a difference
    (:func:`require_passed` does).
    """
    from .validate.inputs import make_inputs

    given, where = make_inputs(graph, feeds, seed=seed)
    ref = _run(clone_graph(graph), given)
    steps: list[StepCheck] = []
    for p in make_passes(passes):
        before = len(graph.nodes)
        result = run_one(p, graph)
        step = StepCheck(p.name, result.detail, result.modified, before, len(result.graph.nodes))
        steps.append(step)
        graph = result.graph
        if not result.modified:
            continue
        try:
            graph.verify(require_static=False)
        except OpbridgeError as err:
            err.detail = f"after pass '{p.name}': {err.detail}"
            raise
        _compare_step(step, graph, ref, _run(graph, given), tolerance)
    return graph, PassCheck(steps, where)


def require_passed(check: PassCheck) -> None:
    """Raise :class:`PassCheckError` naming the first pass that changed the result."""
    step = check.first_failure
    if step is None:
        return
    tensor, node, op, why = step.failures[0]
    more = f" (and {len(step.failures) - 1} more tensor(s))" if len(step.failures) > 1 else ""
    err = PassCheckError(
        f"pass '{step.name}' changed what the graph computes: tensor '{tensor}', now made by "
        f"node '{node}' ({op}), differs from the graph before the passes{more}: {why}",
        hint="fix the replacement op's compute or tighten the pattern's predicates; convert "
             "without the pass to compare",
        ir_node=node, ir_op=op)
    err.check = check
    raise err
