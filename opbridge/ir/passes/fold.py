"""Constant folding: a node whose inputs are all constant is evaluated and becomes a constant.

Covers the shape-computing chains of exported models (Shape, ConstantOfShape, Range, Gather,
Concat ...). The op's own reference compute evaluates it, so folding means what interpreting
means. Random ops are never folded; neither are results much larger than their inputs
(folding ``Expand`` of a scalar into a huge tensor would only bloat the file).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import InterpretError, OpbridgeError, node_ctx
from ..graph import Graph, Value
from ..opdef import OpDef
from ..types import to_numpy_dtype
from .base import PassResult

#: IR ops that must never be folded (their result is not a function of their inputs).
NO_FOLD: set[str] = {
    "Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
    "RandomUniformLike",
}

#: IR ops left unfolded on a constant tensor input: a dequantized weight stays an integer
#: constant (a quarter of the bytes, and what the integer-op passes and int8 kernels read). A
#: single value (a Clip bound, a pad value) still folds, for the mappings that need it constant.
KEEP_UNFOLDED: set[str] = {"DequantizeLinear"}

#: A folded result may be at most this many bytes larger than its constant inputs.
FOLD_GROWTH_BYTES = 1 << 20


def can_fold(opdef: OpDef, inputs: Sequence[Value | None]) -> bool:
    """True when the op has a compute, is deterministic and every present input is constant."""
    present = [v for v in inputs if v is not None]
    return (
        bool(present)
        and opdef.compute_function is not None
        and opdef.name not in NO_FOLD
        and not (opdef.name in KEEP_UNFOLDED and present[0].data is not None and present[0].data.size > 1)
        and all(p.kind in ("tensor", "any") for p in opdef.outputs)  # a sequence is no constant
        and all(v.data is not None for v in present)
    )


def evaluate(
    opdef: OpDef,
    node_name: str,
    args: Sequence[np.ndarray | None],
    attrs: dict[str, Any],
    types: Sequence[tuple[tuple[Any, ...], str]],
) -> list[np.ndarray] | None:
    """Run the op's compute on constant ``args``; None if the result would be too large.

    ``types`` are the outputs' inferred (shape, dtype); the results are checked against them.
    """
    in_bytes = sum(a.nbytes for a in args if a is not None)
    out_bytes = 0
    for shape, dtype in types:
        n = 1
        for d in shape:
            n *= int(d)
        out_bytes += n * to_numpy_dtype(dtype).itemsize
    if out_bytes > in_bytes + FOLD_GROWTH_BYTES:
        return None
    where = node_ctx(node_name, opdef.name)
    assert opdef.compute_function is not None
    try:
        with np.errstate(all="ignore"):
            result = opdef.compute_function(*args, **attrs)
    except OpbridgeError:
        raise
    except Exception as err:
        raise InterpretError(
            f"{where}: constant folding failed: {type(err).__name__}: {err}",
            hint="the op's compute rejected its constant inputs",
        ) from err
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(results) != len(types):
        raise InterpretError(f"{where}: compute returned {len(results)} outputs, expected {len(types)}")
    from ..interpret import checked_result

    return [checked_result(where, opdef, i, f"#{i}", dtype, tuple(shape), r, part="(folding) ")
            for i, (r, (shape, dtype)) in enumerate(zip(results, types))]


class FoldConstants:
    """Replace every foldable node by constants named like its outputs."""

    name = "fold_constants"

    def __call__(self, graph: Graph) -> PassResult:
        nodes = []
        constants = dict(graph.constants)
        modified = False
        for node in graph.nodes:
            opdef = graph.registry.get(node.op)
            if not can_fold(opdef, node.inputs):
                nodes.append(node)
                continue
            args = [v.data if v is not None else None for v in node.inputs]
            outs = evaluate(opdef, node.name, args, node.attrs,
                            [(v.shape, v.dtype) for v in node.outputs])
            if outs is None:
                nodes.append(node)
                continue
            for v, arr in zip(node.outputs, outs):
                v.data = arr
                v.producer = None
                constants[v.name] = v
            modified = True
        if not modified:
            return PassResult(graph, False)
        g = Graph(graph.name, graph.inputs, graph.outputs, nodes, constants.values(),
                  graph.registry, graph.metadata)
        g.rebuild_uses()
        return PassResult(g, True)
