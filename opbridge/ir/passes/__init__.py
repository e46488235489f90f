"""IR passes: graph-to-graph transformations with a small contract (see :mod:`.base`).

:data:`PASSES` names every registered pass, built-in or a plugin's (:func:`register_pass`);
:data:`DEFAULT_PASSES` are those ``convert()`` runs. ``fold_batchnorm`` and the built-in fusions
(:data:`FUSION_PASSES`) are opt-in: each removes tensors that layer-by-layer validation compares
by name (see their modules); ``convert(..., passes=("default", "fusions"))`` (``convert --passes
default,fusions``) runs them all. :mod:`.pattern` is the public way to write a fusion: match a
chain or small DAG of ops and replace it with one op.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from ...errors import OpbridgeError, RegistryError
from ...sites import caller_site
from ..graph import Graph
from .base import GraphPass, PassError, PassResult, run_passes
from .dce import EliminateDeadCode
from .fold import FoldConstants
from .fold_batchnorm import FoldBatchNormIntoConv
from .fold_scale import FoldScaleIntoConv
from .fuse_activation import FuseConvActivation, FuseMatMulBiasActivation
from .fuse_transformer import FuseAttention, FuseGelu, FuseLayerNorm
from .pattern import Match, Pattern, PatternError, RewritePass, Rewriter
from .quantize_ops import FoldQDQ

#: Pass name -> a factory of the pass.
PASSES: dict[str, Callable[[], GraphPass]] = {
    FoldConstants.name: FoldConstants,
    EliminateDeadCode.name: EliminateDeadCode,
    FoldBatchNormIntoConv.name: FoldBatchNormIntoConv,
    FoldScaleIntoConv.name: FoldScaleIntoConv,
    FuseLayerNorm.name: FuseLayerNorm,
    FuseGelu.name: FuseGelu,
    FuseAttention.name: FuseAttention,
    FuseMatMulBiasActivation.name: FuseMatMulBiasActivation,
    FuseConvActivation.name: FuseConvActivation,
    FoldQDQ.name: FoldQDQ,
}

DEFAULT_PASSES: tuple[str, ...] = ("fold_constants", "dead_code")

#: Pass name -> where :func:`register_pass` registered it (``file:line``); passes put into
#: :data:`PASSES` directly are described by their factory's module.
_SITES: dict[str, str] = {}

F = TypeVar("F")


class FunctionPass:
    """A pass made from a function ``fn(graph)`` returning a PassResult, a Graph (the rewritten
    graph) or None (the graph was changed in place)."""

    def __init__(self, name: str, fn: Callable[[Graph], Any], registered_at: str) -> None:
        self.name = name
        self.fn = fn
        self.registered_at = registered_at

    def __call__(self, graph: Graph) -> PassResult:
        result = self.fn(graph)
        if isinstance(result, PassResult):
            return result
        if result is None:
            graph.rebuild_uses()
            return PassResult(graph, True)
        if isinstance(result, Graph):
            result.rebuild_uses()
            return PassResult(result, True)
        raise PassError(
            f"pass '{self.name}' (registered at {self.registered_at}) returned a "
            f"{type(result).__name__}",
            hint="a pass returns a PassResult, the rewritten Graph, or None after changing the "
                 "graph in place")


def _site_of(name: str) -> str:
    if name in _SITES:
        return _SITES[name]
    factory = PASSES.get(name)
    module = getattr(factory, "__module__", None) or type(factory).__module__
    return f"{module}.{getattr(factory, '__qualname__', type(factory).__name__)}"


def register_pass(name: str, *, override: bool = False) -> Callable[[F], F]:
    """Register a named graph pass: ``ob.register_pass("fuse_ffn")(fn)``, or as a decorator.

    ``fn`` is a function ``fn(graph) -> PassResult | Graph | None``, a pass object (a
    :class:`~.pattern.RewritePass` from ``Pattern.rewrite``, anything with ``__call__(graph)``),
    or a pass class (called with no arguments for each run). The name is then usable in
    ``ob.convert(..., passes=[...])`` and ``opbridge convert --pass NAME``. Registering a name
    twice is an error naming both places, unless ``override=True``. Returns ``fn`` unchanged.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise RegistryError(f"pass name {name!r}: must be an identifier (letters, digits, _)",
                            hint="e.g. register_pass(\"fuse_ffn\")")
    site = caller_site(__file__)

    def register(fn: F) -> F:
        if name in PASSES and not override:
            raise RegistryError(
                f"pass '{name}' is already registered at {_site_of(name)}; registered again at {site}",
                hint="pass override=True to register_pass to replace it, or choose another name")
        factory: Callable[[], GraphPass]
        if inspect.isclass(fn):
            factory = fn  # type: ignore[assignment]  # a pass class: a new pass per run
        elif callable(fn):
            obj: Any = fn
            if isinstance(obj, RewritePass):
                obj.name = name  # a pattern's pass is known by the name it is registered under
            elif not isinstance(getattr(obj, "name", None), str) or inspect.isfunction(obj):
                obj = FunctionPass(name, fn, site)

            def factory() -> GraphPass:
                return obj  # type: ignore[no-any-return]
        else:
            raise RegistryError(f"register_pass('{name}') was given a {type(fn).__name__}",
                                hint="give it a function fn(graph), a pass object or a pass class")
        PASSES[name] = factory
        _SITES[name] = site
        return fn

    return register


#: The built-in fusions, in the order they compose (GELU before MatMul + activation, the
#: BatchNormalization fold before Conv + activation).
FUSION_PASSES: tuple[str, ...] = (
    "fold_batchnorm", "fuse_layernorm", "fuse_gelu", "fuse_attention",
    "fuse_matmul_bias_activation", "fuse_conv_activation",
)


#: Names that stand for several passes in ``passes=`` / ``--passes``.
PASS_GROUPS: dict[str, tuple[str, ...]] = {"default": DEFAULT_PASSES, "fusions": FUSION_PASSES}


def make_passes(names: Iterable[str | GraphPass]) -> list[GraphPass]:
    """Pass objects for names (or pass objects, passed through); a group name
    (:data:`PASS_GROUPS`) stands for its passes; an unknown name is an error."""
    out: list[GraphPass] = []
    for n in names:
        if not isinstance(n, str):
            out.append(n)
            continue
        if n in PASS_GROUPS and n not in PASSES:
            out.extend(make_passes(PASS_GROUPS[n]))
            continue
        if n not in PASSES:
            raise OpbridgeError(
                f"unknown pass '{n}'",
                hint=f"known passes: {', '.join(sorted(PASSES))}; groups: "
                     f"{', '.join(sorted(PASS_GROUPS))}; a plugin registers one with "
                     "opbridge.register_pass(name) (load it with --plugin FILE)")
        p = PASSES[n]()
        if getattr(p, "name", n) != n and not isinstance(p, FunctionPass):
            p = _Renamed(n, p)
        out.append(p)
    return out


class _Renamed:
    """A pass object registered under another name than its own ``name``: messages use the
    registered one."""

    def __init__(self, name: str, inner: GraphPass) -> None:
        self.name = name
        self.inner = inner

    def __call__(self, graph: Graph) -> PassResult:
        return self.inner(graph)


def with_passes(extra: Sequence[str], base: Sequence[str] = DEFAULT_PASSES) -> tuple[str, ...]:
    """``base`` with the ``extra`` passes run right after constant folding (or first, when
    ``base`` does not fold): what ``opbridge convert --pass NAME`` runs. Folding first gives a
    pattern its constant weights; the built-in clean-ups and fusions run after the user's."""
    base = tuple(base)
    at = base.index("fold_constants") + 1 if "fold_constants" in base else 0
    return (*base[:at], *extra, *base[at:])


def optimize(graph: Graph, passes: Iterable[str | GraphPass] = DEFAULT_PASSES) -> Graph:
    """Run the named passes on ``graph``; returns the verified result."""
    return run_passes(graph, make_passes(passes))


__all__ = [
    "DEFAULT_PASSES", "FUSION_PASSES", "PASSES", "PASS_GROUPS", "EliminateDeadCode",
    "FoldBatchNormIntoConv", "FoldConstants", "FoldQDQ", "FuseAttention", "FuseConvActivation", "FuseGelu",
    "FuseLayerNorm", "FuseMatMulBiasActivation", "FunctionPass", "GraphPass", "Match", "PassError",
    "PassResult", "Pattern", "PatternError", "RewritePass", "Rewriter", "make_passes", "optimize",
    "register_pass", "run_passes", "with_passes",
]
