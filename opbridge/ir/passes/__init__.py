"""IR passes: graph-to-graph transformations with a small contract (see :mod:`.base`).

:data:`PASSES` names every built-in pass; :data:`DEFAULT_PASSES` are those ``convert()`` runs.
``fold_batchnorm`` is opt-in: it removes the Conv's output tensor (see its module).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...errors import OpbridgeError
from ..graph import Graph
from .base import GraphPass, PassResult, run_passes
from .dce import EliminateDeadCode
from .fold import FoldConstants
from .fold_batchnorm import FoldBatchNormIntoConv

#: Pass name -> a factory of the pass.
PASSES: dict[str, Callable[[], GraphPass]] = {
    FoldConstants.name: FoldConstants,
    EliminateDeadCode.name: EliminateDeadCode,
    FoldBatchNormIntoConv.name: FoldBatchNormIntoConv,
}

DEFAULT_PASSES: tuple[str, ...] = ("fold_constants", "dead_code")


def make_passes(names: Iterable[str | GraphPass]) -> list[GraphPass]:
    """Pass objects for names (or pass objects, passed through); an unknown name is an error."""
    out: list[GraphPass] = []
    for n in names:
        if not isinstance(n, str):
            out.append(n)
            continue
        if n not in PASSES:
            raise OpbridgeError(f"unknown pass '{n}'", hint=f"known passes: {', '.join(sorted(PASSES))}")
        out.append(PASSES[n]())
    return out


def optimize(graph: Graph, passes: Iterable[str | GraphPass] = DEFAULT_PASSES) -> Graph:
    """Run the named passes on ``graph``; returns the verified result."""
    return run_passes(graph, make_passes(passes))


__all__ = [
    "DEFAULT_PASSES", "PASSES", "EliminateDeadCode", "FoldBatchNormIntoConv", "FoldConstants",
    "GraphPass", "PassResult",
    "make_passes", "optimize", "run_passes",
]
