"""A graph with symbolic input dims, made static for given input sizes.

Every node is created again through :class:`GraphBuilder` with the same op, attributes, names,
origin and placement, so each shape function runs on the concrete sizes: the result is the
graph ``ob.convert`` would give with those ``input_shapes`` (when the model's shape chains are
expressed in the graph, not folded for one size). As the converter does with static shapes, a
``Shape`` of a now static value and a node whose inputs are all constant become constants, a
``Dynamic*`` op whose run-time operands became constants becomes its static op, and an ``If``'s
branches are specialised to the shapes it passes them, so the sizes they compute are static.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ShapeError
from . import dims as _dims
from .graph import Graph, GraphBuilder, Node, Value
from .types import format_shape, is_static, to_numpy_dtype


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
    kept = {id(v) for v in graph.outputs}
    for n in graph.nodes:
        ins = [None if v is None else new[id(v)] for v in n.inputs]
        folded = None if any(id(v) in kept for v in n.outputs) else _folded(graph, n, ins)
        if folded is not None:
            for old, arr in zip(n.outputs, folded):
                new[id(old)] = b.constant(old.name, arr, old.dtype)
            continue
        op, ins, attrs = _static_form(graph, n, ins)
        out = b.op(op, ins, name=n.name, outputs=[v.name for v in n.outputs], origin=n.origin,
                   num_outputs=len(n.outputs), placement=n.placement, **attrs)
        for old, v in zip(n.outputs, out if isinstance(out, tuple) else (out,)):
            new[id(old)] = v
    b.output(*(new[id(v)] for v in graph.outputs))
    return b.build(require_static=False)


def _folded(graph: Graph, n: Node, ins: Sequence[Value | None]) -> list[np.ndarray] | None:
    """The constant results of ``n`` when its inputs make them constant here, else None."""
    from .passes.fold import can_fold, evaluate

    opdef = graph.registry.get(n.op)
    args: list[np.ndarray | None]
    if n.op == "Shape" and ins[0] is not None and ins[0].data is None and is_static(ins[0].shape):
        x = ins[0]  # the shape alone decides it: a zero-stride stand-in of the right shape
        args = [np.broadcast_to(np.zeros((), to_numpy_dtype(x.dtype)), tuple(int(d) for d in x.shape))]
    elif can_fold(opdef, ins):
        args = [None if v is None else v.data for v in ins]
    else:
        return None
    types = opdef.infer(n.name, [None if v is None else (v.shape, v.dtype) for v in ins],
                        opdef.normalize_attrs(dict(n.attrs), n.name), args, len(n.outputs))
    if not all(is_static(shape) for shape, _ in types):
        return None
    return evaluate(opdef, n.name, args, dict(n.attrs), types)


def _static_form(graph: Graph, n: Node, ins: list[Value | None]
                 ) -> tuple[str, list[Value | None], dict[str, Any]]:
    """``n``'s op, inputs and attributes in the specialised graph: a ``Dynamic<X>`` whose
    run-time operands are constants is ``X`` with them as parameters; an ``If``'s branches are
    specialised to the static shapes it passes them."""
    attrs = dict(n.attrs)
    if n.op == "If" and all(v is not None and is_static(v.shape) for v in ins[1:]):
        for key in ("then_branch", "else_branch"):
            branch = attrs[key]
            attrs[key] = specialize(branch, {bv.name: tuple(int(d) for d in v.shape)  # type: ignore[union-attr]
                                             for bv, v in zip(branch.inputs, ins[1:])})
        return n.op, ins, attrs
    static = n.op[len("Dynamic"):] if n.op.startswith("Dynamic") else ""
    if not static or static not in graph.registry:
        return n.op, ins, attrs
    from .ops.dynamic import param_value

    base, opdef = graph.registry.get(static), graph.registry.get(n.op)
    k = len(base.inputs)
    if any(v is not None and v.data is None for v in ins[k:]):
        return n.op, ins, attrs
    attrs.pop("hint", None)
    for spec, v in zip(opdef.inputs[k:], ins[k:]):
        if v is not None and v.data is not None:
            attrs[spec.name] = param_value(base.params[spec.name].type, v.data)
    return static, ins[:k], attrs
