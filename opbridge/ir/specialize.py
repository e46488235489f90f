"""A graph with symbolic input dims, made static for given input sizes.

Every node is created again through :class:`GraphBuilder` with the same op, attributes, names,
origin and placement, so each shape function runs on the concrete sizes: the result is the
graph ``ob.convert`` would give with those ``input_shapes`` (when the model's shape chains are
expressed in the graph, not folded for one size). As the converter does with static shapes, a
``Shape`` of a now static value and a node whose inputs are all constant become constants, a
``Dynamic*`` op whose run-time operands became constants becomes its static op, an ``If``'s
branches are specialised to the shapes it passes them, so the sizes they compute are static,
and a ``Scan`` over a now static number of steps (at most :data:`MAX_UNROLL`) is unrolled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import OpbridgeError, ShapeError
from . import dims as _dims
from .graph import Graph, GraphBuilder, Node, Value
from .ops.control import scan_layout
from .types import format_shape, is_static, to_numpy_dtype

#: A Scan over at most this many steps is unrolled (as the converters unroll static loops).
MAX_UNROLL = 4096


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
        new[id(v)] = b.input(v.name, v.dtype, tuple(shapes.get(v.name, v.shape)), kind=v.kind)
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
        unrolled = _unrolled_scan(b, n, ins)
        if unrolled is not None:
            for old, v in zip(n.outputs, unrolled):
                # a graph output keeps its name (the run's results are keyed by it)
                new[id(old)] = (b.op("Identity", [v], name=f"{n.name}/{old.name}", outputs=[old.name])
                                if id(old) in kept else v)
            continue
        op, ins, attrs = _static_form(graph, n, ins)
        # a Dynamic* op made static runs where its static op runs (the host only for the run's sizes)
        out = b.op(op, ins, name=n.name, outputs=[v.name for v in n.outputs], origin=n.origin,
                   num_outputs=len(n.outputs), placement=n.placement if op == n.op else None, **attrs)
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
            try:
                attrs[key] = specialize(branch, {bv.name: tuple(int(d) for d in v.shape)  # type: ignore[union-attr]
                                                 for bv, v in zip(branch.inputs, ins[1:])})
            except OpbridgeError:
                pass  # invalid for these sizes: only a run that takes it fails, as onnxruntime's would
        return n.op, ins, attrs
    from .ops.dynamic import STATIC_FORMS, param_value

    static = STATIC_FORMS.get(n.op, "")
    if not static:
        return n.op, ins, attrs

    base, opdef = graph.registry.get(static), graph.registry.get(n.op)
    k = len(base.inputs)
    if any(v is not None and v.data is None for v in ins[k:]):
        return n.op, ins, attrs
    attrs.pop("hint", None)
    for spec, v in zip(opdef.inputs[k:], ins[k:]):
        if v is not None and v.data is not None:
            attrs[spec.name] = param_value(base.params[spec.name].type, v.data)
    return static, ins[:k], attrs


def _unrolled_scan(b: GraphBuilder, n: Node, ins: list[Value | None]) -> list[Value] | None:
    """The outputs of a Scan unrolled step by step (each step the body's nodes again, on the
    step's slices), when its inputs are static and it has 1 to MAX_UNROLL steps; else None."""
    vals = [v for v in ins if v is not None and is_static(v.shape) and v.kind == "tensor"]
    if n.op != "Scan" or len(vals) != len(ins):
        return None
    body, m, n_caps = n.attrs["body"], n.attrs["num_scan_inputs"], n.attrs.get("num_captures", 0)
    n_states = len(ins) - m - n_caps
    in_axes, in_dirs, out_axes, out_dirs = scan_layout(m, len(body.outputs) - n_states, n.attrs)
    xs = vals[n_states:n_states + m]
    axes = [a % len(x.shape) for a, x in zip(in_axes, xs)]
    steps = int(xs[0].shape[axes[0]]) if xs else 0
    if not 0 < steps <= MAX_UNROLL:
        return None
    consts = {id(c): b.constant(f"{n.name}/{c.name}", c.data, c.dtype) for c in body.constants.values()}
    states, caps = vals[:n_states], vals[n_states + m:]
    parts: list[list[Value]] = [[] for _ in body.outputs[n_states:]]
    for t in range(steps):
        here = f"{n.name}/{t}/"
        picked = []
        for k, (x, a, d) in enumerate(zip(xs, axes, in_dirs)):
            i = steps - 1 - t if d else t
            sl = b.op("Slice", [x], name=f"{here}slice{k}", starts=[i], ends=[i + 1], axes=[a])
            picked.append(b.op("Squeeze", [sl], name=f"{here}squeeze{k}", axes=[a]))
        env = dict(consts)
        for v, given in zip(body.inputs, [*states, *picked, *caps]):
            env[id(v)] = given
        for bn in body.nodes:
            out = b.op(bn.op, [None if v is None else env[id(v)] for v in bn.inputs], name=here + bn.name,
                       outputs=[here + v.name for v in bn.outputs], origin=n.origin,
                       num_outputs=len(bn.outputs), placement=bn.placement, **bn.attrs)
            for old, v in zip(bn.outputs, out if isinstance(out, tuple) else (out,)):
                env[id(old)] = v
        outs = [env[id(v)] for v in body.outputs]
        states = outs[:n_states]
        for j, v in enumerate(outs[n_states:]):
            parts[j].append(b.op("Unsqueeze", [v], name=f"{here}stack{j}", axes=[out_axes[j]]))
    stacked = []
    for j, seq in enumerate(parts):
        seq = seq[::-1] if out_dirs[j] else seq
        axis = out_axes[j] % (len(seq[0].shape))
        stacked.append(seq[0] if len(seq) == 1 else b.op("Concat", seq, name=f"{n.name}/concat{j}", axis=axis))
    return [*states, *stacked]
