"""A graph with symbolic input dims, made static for given input sizes.

Every node is created again through :class:`GraphBuilder` with the same op, attributes, names,
origin and placement, so each shape function runs on the concrete sizes: the result is the
graph ``ob.convert`` would give with those ``input_shapes`` (when the model's shape chains are
expressed in the graph, not folded for one size).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import ShapeError
from . import dims as _dims
from .graph import Graph, GraphBuilder, Value
from .types import format_shape


def input_dims(graph: Graph, shapes: Mapping[str, Sequence[int]], what: str = "input_shapes"
               ) -> dict[str, int]:
    """The sizes ``shapes`` give the graph inputs' symbolic dims; an input that is not in the
    graph, or a shape that does not fit its declared one, is an error naming it."""
    names = [v.name for v in graph.inputs]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise ShapeError(f"{what} names '{unknown[0]}', which is not an input of graph '{graph.name}'",
                         hint=f"its inputs are: {', '.join(names)}")
    values: dict[str, int] = {}
    for v in graph.inputs:
        if v.name not in shapes:
            continue
        given = tuple(int(d) for d in shapes[v.name])
        if len(given) != len(v.shape) or _dims.bind_shape(v.shape, given, values) is not None:
            raise ShapeError(f"{what}['{v.name}'] = {list(given)} does not fit input '{v.name}' "
                             f"{format_shape(v.shape)}", hint="give one size per dim; static dims "
                             "keep their size")
    return values


def specialize(graph: Graph, shapes: Mapping[str, Sequence[int]]) -> Graph:
    """``graph`` with its inputs at ``shapes`` (input name -> sizes; inputs not named keep their
    shapes) and every node's shapes inferred again."""
    input_dims(graph, shapes)
    b = GraphBuilder(graph.name, registry=graph.registry)
    b.metadata.update(graph.metadata)
    new: dict[int, Value] = {}
    for v in graph.inputs:
        new[id(v)] = b.input(v.name, v.dtype, tuple(shapes.get(v.name, v.shape)))
    for c in graph.constants.values():
        new[id(c)] = b.constant(c.name, c.data)
    for n in graph.nodes:
        ins = [None if v is None else new[id(v)] for v in n.inputs]
        out = b.op(n.op, ins, name=n.name, outputs=[v.name for v in n.outputs], origin=n.origin,
                   num_outputs=len(n.outputs), placement=n.placement, **n.attrs)
        for old, v in zip(n.outputs, out if isinstance(out, tuple) else (out,)):
            new[id(old)] = v
    b.output(*(new[id(v)] for v in graph.outputs))
    return b.build(require_static=False)
