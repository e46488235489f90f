"""``prim::If`` and ``prim::Loop``: folded when the condition and trip count are known while
converting, else run-time IR If / Loop nodes holding their blocks as sub-graphs.

A block (docs/torchscript-json.md, "Blocks") is an origin graph of its own: an If's two
branches take no inputs; a Loop's body takes the iteration number and the loop-carried
values and gives the condition for the next iteration and the new loop-carried values. A
block reads the values of the blocks around it by name; when mapped into an IR sub-graph,
what it reads becomes a capture input of the If / Loop node (opbridge/ir/ops/control.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import OpbridgeError, ShapeError, node_ctx
from ...ir.graph import Value
from ...ir.ops.control import merge_shapes
from ...parsers.origin import OriginGraph, OriginNode, TensorInfo
from ..context import MapContext
from .common import Args, as_0d, cast, ts_mapping

#: Upper bound on unrolled iterations of a loop whose trip count and condition are known
#: (a longer one is a run-time Loop).
MAX_UNROLL = 4096


def _blocks(node: OriginNode, g: MapContext, count: int) -> list[OriginGraph]:
    blocks = node.attrs.get("blocks") or []
    if len(blocks) != count:
        raise g.error(f"has {len(blocks)} blocks, {count} expected",
                      hint="re-export the model with opbridge export-torchscript (format version 2)")
    return list(blocks)


def _known_bool(v: Value) -> bool | None:
    return None if v.data is None else bool(np.asarray(v.data).reshape(-1)[0])


def _raise_node(block: OriginGraph) -> OriginNode | None:
    """The block's ``prim::RaiseException`` (a branch that raises: an input check)."""
    return next((n for n in block.nodes if n.domain == "prim" and n.op_type == "RaiseException"), None)


def _raised(node: OriginNode, g: MapContext) -> str:
    """``ValueError: message`` of a prim::RaiseException node."""
    a = Args(node, g)
    msg = a.py(0, what="the message") if len(a) > 0 else ""
    cls = a.py(1, what="the exception") if len(a) > 1 and not a.is_none(1) else "Exception"
    return f"{str(cls).rpartition('.')[2]}: {msg}"


@ts_mapping("prim::If")
def if_(node: OriginNode, g: MapContext) -> Any:
    then_b, else_b = _blocks(node, g, 2)
    cond = Args(node, g).tensor(0, what="the condition")
    taken = _known_bool(cond)
    raising = [_raise_node(b) for b in (then_b, else_b)]
    if taken is None and all(raising):
        raise g.unsupported("both branches raise an exception", hint="remove the check from the model")
    if taken is None and any(raising):
        # an input check on a run-time value (sr not 16000 or 8000): the run takes the other
        # branch, as the exporter drops checks that held on the example inputs
        taken = raising[0] is None
    if taken is not None:
        k = 0 if taken else 1
        if raising[k] is not None:
            raise g.unsupported(
                f"the model raises {_raised(raising[k], g)} for this input (the branch the "
                "condition takes, known while converting, raises)",
                hint="give an input value (input_values= / --input-value) the model accepts")
        return g.map_subgraph((then_b, else_b)[k], [], prefix=f"{node.name}/block{k}/")
    then_g, caps = g.map_to_graph(then_b, [], prefix=f"{node.name}/block0/")
    else_g, else_caps = g.map_to_graph(else_b, [], prefix=f"{node.name}/block1/", captures=caps)
    if len(else_caps) > len(caps):  # the else branch reads more: the then branch takes it too
        then_g, caps = g.map_to_graph(then_b, [], prefix=f"{node.name}/block0/", captures=else_caps)
    for k, (a, b) in enumerate(zip(then_g.outputs, else_g.outputs)):
        if a.dtype != b.dtype:
            raise g.unsupported(
                f"output {k} is {a.dtype} in one branch and {b.dtype} in the other",
                hint="make both branches give the same dtype (or pass the condition as a "
                     "constant: input_values= / --input-value)")
    outs = g.op("If", [_as_bool(g, cond), *caps], then_branch=then_g, else_branch=else_g,
                num_outputs=len(then_g.outputs))
    return list(outs) if isinstance(outs, tuple) else [outs]


def _as_bool(g: MapContext, v: Value) -> Value:
    """A condition as the 0-d bool the IR's If / Loop take."""
    return cast(g, as_0d(g, v, "the condition"), "bool")


@ts_mapping("prim::Uninitialized")
def uninitialized(node: OriginNode, g: MapContext) -> Any:
    """The value a raising branch gives for the If's outputs: never read (the branch is not
    mapped), so it emits nothing."""
    return None


@ts_mapping("prim::RaiseException")
def raise_exception(node: OriginNode, g: MapContext) -> Any:
    """Reached only outside a prim::If branch (those are resolved by ``if_``)."""
    raise g.unsupported(f"the model raises {_raised(node, g)} unconditionally here",
                        hint="remove the raise from the model, or put it under an if")


@ts_mapping("prim::Loop")
def loop(node: OriginNode, g: MapContext) -> Any:
    body, = _blocks(node, g, 1)
    a = Args(node, g)
    trip = a.tensor(0, what="the trip count")
    cond = a.tensor(1, what="the condition")
    carried = [a.tensor(2 + k, what=f"loop-carried value {k}") for k in range(len(a) - 2)]
    if len(body.inputs) != 1 + len(carried) or len(body.outputs) != 1 + len(carried):
        raise g.error(f"its body takes {len(body.inputs)} inputs and gives {len(body.outputs)} "
                      f"outputs for {len(carried)} loop-carried values")
    if trip.data is not None and cond.data is not None:
        unrolled = _unrolled(node, g, body, trip, cond, carried)
        if unrolled is not None:
            return unrolled
    return _runtime_loop(node, g, body, trip, cond, carried)


def _unrolled(node: OriginNode, g: MapContext, body: OriginGraph, trip: Value, cond: Value,
              carried: list[Value]) -> list[Value] | None:
    """The body inlined once per iteration (a known trip count), or None when an iteration's
    condition is computed at run time (a ``break`` on a tensor's value) or the loop runs more
    than MAX_UNROLL iterations: the loop then runs at run time, and the nodes inlined so far
    are dead code."""
    limit = int(np.asarray(trip.data).reshape(-1)[0])
    go = bool(_known_bool(cond))
    i = 0
    while go and i < limit:
        if i >= MAX_UNROLL:  # too long to inline: it runs at run time
            return None
        outs = g.map_subgraph(body, [g.constant(np.array(i, np.int64)), *carried],
                              prefix=f"{node.name}/iter{i}/")
        nxt = _known_bool(outs[0])
        if nxt is None:
            return None
        go, carried = nxt, list(outs[1:])
        i += 1
    return carried


def _runtime_loop(node: OriginNode, g: MapContext, body: OriginGraph, trip: Value, cond: Value,
                  carried: list[Value]) -> list[Value]:
    """An IR Loop node: its body takes (iteration, condition, loop-carried values, captures)."""
    ir_body = OriginGraph(
        name=body.name, framework=body.framework, nodes=body.nodes, outputs=body.outputs,
        inputs=[body.inputs[0], TensorInfo(f"{body.name}/cond", None, None), *body.inputs[1:]])
    types: list[tuple[Any, ...]] = [("i64", ()), ("bool", ()),
                                    *((v.dtype, v.shape, v.kind) for v in carried)]
    prefix = f"{node.name}/body/"
    body_g, caps = g.map_to_graph(ir_body, types, prefix=prefix)
    _check_body_outputs(g, body_g.outputs, carried)
    changed = types[:2] + [(v.dtype, merge_shapes(v.shape, out.shape, f"{node.name}:{k}"), v.kind)
                           for k, (v, out) in enumerate(zip(carried, body_g.outputs[1:]))]
    if changed != types:  # a loop-carried value changes shape: type the body by the merged shapes
        try:
            body_g, caps = g.map_to_graph(ir_body, changed, prefix=prefix)
        except (ShapeError, OpbridgeError) as err:
            inner = err.detail.removeprefix(f"{node_ctx(node.name, node.op_type)}, ")  # named once
            raise g.unsupported(
                f"a loop-carried value changes shape from one iteration to the next and the "
                f"body cannot be typed for that: {inner}",
                hint="keep each loop-carried value one shape across iterations (preallocate it and write "
                     "into it), or export with mode='trace', which unrolls the loop for the example "
                     "inputs") from None
    cond_out = body_g.outputs[0]
    if cond_out.dtype != "bool" or cond_out.shape != ():
        raise g.unsupported(f"the body's condition is a {cond_out.dtype} of shape {cond_out.shape}, "
                            "not a bool",
                            hint="make the loop condition a bool (a comparison such as i < n, or bool(t))")
    outs = g.op("Loop", [cast(g, as_0d(g, trip, "the trip count"), "i64"), _as_bool(g, cond), *carried, *caps],
                body=body_g, num_captures=len(caps), num_outputs=len(carried))
    return list(outs) if isinstance(outs, tuple) else [outs]


def _check_body_outputs(g: MapContext, outs: list[Value], carried: list[Value]) -> None:
    for k, (v, out) in enumerate(zip(carried, outs[1:])):
        if v.dtype != out.dtype:
            raise g.unsupported(
                f"loop-carried value {k} enters as {v.dtype} but the body gives {out.dtype}",
                hint="keep the value's dtype the same in every iteration")
