"""ONNX control flow: folded when it is static, else run-time If/Loop/Scan nodes with sub-graphs.

A subgraph is inlined with ``g.map_subgraph`` (the same public hook a plugin uses) when the
control flow is known at conversion: its nodes are mapped through the registry like the
model's own, its tensors renamed under the node's name, and names it takes from the enclosing
graph resolved there. Otherwise it is mapped with ``g.map_to_graph`` into an IR sub-graph of
its own, held by an If/Loop/Scan IR node (opbridge/ir/ops/control.py) that the interpreter
runs; values a body reads from the enclosing graph become that node's capture inputs.

- If-1..21: a constant condition (after folding) inlines the taken branch; a run-time one
  makes an If node with both branches.
- Loop-1..21: a constant trip count and a condition that stays constant when unrolled
  (it depends only on the iteration number, constants and constant loop-carried values)
  unroll the body, up to MAX_UNROLL copies; anything else makes a Loop node.
- Scan-8: each batch row unrolled as Scan-9 (sequence_lens constant), stacked again.
- Scan-9..21: a static sequence length up to MAX_UNROLL unrolls (each step inlines the body on
  slices of the scan inputs, axes and directions honoured); a longer one makes a Scan node.

Spec: https://onnx.ai/onnx/operators/onnx__Scan.html (and If, Loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import OpbridgeError, ShapeError, UnsupportedOpError
from ...ir.graph import Value
from ...ir.ops.control import merge_shapes
from ...parsers.origin import Framework, OriginGraph, OriginNode
from ..context import MapContext
from ..registry import mapping

ONNX = Framework.ONNX

#: Upper bound on unrolled iterations (a Loop with a huge trip count is not a static graph).
MAX_UNROLL = 4096


def inline_graph(g: MapContext, body: OriginGraph, bound: Sequence[Value | None], tag: str) -> list[Value]:
    """Map ``body`` with its inputs bound to ``bound``, its names under ``<node>/<tag>/``."""
    return g.map_subgraph(body, bound, prefix=f"{g.node.name}/{tag}/")


def _scalar(g: MapContext, v: Value | None, what: str) -> Any:
    if v is None:
        return None
    if v.data is None:
        raise g.unsupported(f"{what} is computed at run time; it must be constant to make the graph static")
    return np.asarray(v.data).reshape(-1)[0]


@mapping(ONNX, "If", since_opset=1)
def if_(node: OriginNode, g: MapContext) -> Any:
    cond = g.input(0)
    if cond is not None and cond.data is None:
        return _runtime_if(node, g, cond)
    taken = "then_branch" if bool(_scalar(g, cond, "the condition")) else "else_branch"
    return inline_graph(g, node.get_attr(taken), [], taken)


def _runtime_if(node: OriginNode, g: MapContext, cond: Value) -> Any:
    """An If node; both branches take the same capture inputs (each reads what it needs)."""
    then_body: OriginGraph = node.get_attr("then_branch")
    else_body: OriginGraph = node.get_attr("else_branch")
    try:
        then_g, caps = g.map_to_graph(then_body, [], prefix=f"{node.name}/then_branch/")
        else_g, else_caps = g.map_to_graph(else_body, [], prefix=f"{node.name}/else_branch/",
                                           captures=caps)
        if len(else_caps) > len(caps):  # the else branch reads more: the then branch takes it too
            then_g, caps = g.map_to_graph(then_body, [], prefix=f"{node.name}/then_branch/",
                                          captures=else_caps)
    except OpbridgeError:
        # a branch that cannot be converted for these shapes (one written for another rank)
        # is fine once the condition is known: say which inputs would make it constant
        g.const(0)
        raise
    if any(a.shape != b.shape for a, b in zip(then_g.outputs, else_g.outputs)):
        g.const(0)  # its outputs' shapes depend on the branch: note what would make it static
    outs = g.op("If", [cond, *caps], then_branch=then_g, else_branch=else_g,
                num_outputs=len(then_g.outputs))
    return list(outs) if isinstance(outs, tuple) else [outs]


#: Ops whose result is not a function of their inputs: a condition they feed is not static.
_RANDOM = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli",
           "Multinomial"}


def _static_names(g: MapContext, body: OriginGraph, static_inputs: set[str]) -> set[str]:
    """The body's tensor names that are constant when the body is unrolled: initializers,
    constant enclosing values, ``static_inputs``, and what nodes compute from them alone
    (a node holding a subgraph of its own counts as run-time)."""
    static = set(static_inputs) | set(body.tensors)
    defined = {t.name for t in body.inputs} | {o for n in body.nodes for o in n.outputs}

    def known(name: str) -> bool:
        if not name or name in static:
            return True
        if name in defined:
            return False
        v = g.peek(name)
        return (v.data is not None) if v is not None else name in g.origin_graph.tensors

    for n in body.nodes:
        nested = any(isinstance(a, OriginGraph) for a in n.attrs.values())
        if not nested and n.op_type not in _RANDOM and all(known(i) for i in n.inputs):
            static.update(o for o in n.outputs if o)
    return static


def _unrolls(g: MapContext, body: OriginGraph, trip_v: Value | None, cond_v: Value | None,
             carried: Sequence[Value | None]) -> bool:
    """Whether the Loop is static: constant trip count (at most MAX_UNROLL) and condition, and
    a body condition that stays constant from one unrolled iteration to the next."""
    if any(v is not None and v.data is None for v in (trip_v, cond_v)):
        return False
    if trip_v is None and cond_v is None:
        return False
    if trip_v is not None and int(np.asarray(trip_v.data).reshape(-1)[0]) > MAX_UNROLL:
        return False
    names = [t.name for t in body.inputs]
    assumed = {k for k, v in enumerate(carried) if v is not None and v.data is not None}
    while True:  # drop the carried values the body does not keep constant, until none changes
        static = _static_names(g, body, {*names[:2], *(names[2 + k] for k in assumed)})
        kept = {k for k in assumed if body.outputs[1 + k].name in static}
        if kept == assumed:
            return body.outputs[0].name in static
        assumed = kept


@mapping(ONNX, "Loop", since_opset=1)
def loop(node: OriginNode, g: MapContext) -> Any:
    body: OriginGraph = node.get_attr("body")
    trip_v, cond_v = g.input(0), g.input(1)
    carried: list[Value | None] = [g.input(i) for i in range(2, g.num_inputs)]
    if not _unrolls(g, body, trip_v, cond_v, carried):
        return _runtime_loop(node, g, body, trip_v, cond_v, carried)
    trip = _scalar(g, trip_v, "the trip count M")
    cond = _scalar(g, cond_v, "the condition")
    limit = int(trip) if trip is not None else MAX_UNROLL
    n_carried = len(carried)
    scans: list[list[Value]] = [[] for _ in range(len(body.outputs) - 1 - n_carried)]
    it = 0
    keep_going = True if cond is None else bool(cond)
    while keep_going and it < limit:
        cond_in = g.constant(np.array(keep_going), name=f"{node.name}/cond{it}")
        outs = inline_graph(g, body, [g.constant(np.array(it, np.int64), name=f"{node.name}/iter{it}"),
                                      cond_in, *carried], f"iter{it}")
        keep_going = bool(_scalar(g, outs[0], f"the condition after iteration {it}"))
        carried = list(outs[1:1 + n_carried])
        for k, v in enumerate(outs[1 + n_carried:]):
            scans[k].append(g.op("Unsqueeze", [v], axes=[0]))
        it += 1
    if trip is None and keep_going:
        raise g.unsupported(f"the condition is still true after {MAX_UNROLL} iterations")
    results: list[Value | None] = list(carried)
    for parts in scans:
        if not parts:
            raise g.unsupported("a Loop that runs zero times has empty scan outputs of unknown shape")
        results.append(parts[0] if len(parts) == 1 else g.op("Concat", parts, axis=0))
    return results


def _runtime_loop(node: OriginNode, g: MapContext, body: OriginGraph, trip_v: Value | None,
                  cond_v: Value | None, carried: Sequence[Value | None]) -> Any:
    """A Loop node. The body is typed from the loop-carried values' first shapes; a value
    whose shape the body changes is typed again with symbolic dims where it changes, and if
    the body's ops cannot be typed so, it keeps the first shapes and its shapes are taken
    at run time (the interpreter checks dtype and rank)."""
    if any(v is None for v in carried):
        raise g.error("a loop-carried value is absent; ONNX requires every one")
    values = [v for v in carried if v is not None]
    types: list[tuple[Any, ...]] = [("i64", ()), ("bool", ()),
                                    *((v.dtype, v.shape, v.kind) for v in values)]
    prefix = f"{node.name}/body/"
    try:
        body_g, caps = g.map_to_graph(body, types, prefix=prefix)
    except UnsupportedOpError:
        # a body op that needs a value fixed per iteration (a Slice start computed from the
        # iteration number) works once the loop unrolls: say which inputs would make it static
        for i, v in ((0, trip_v), (1, cond_v)):
            if v is not None:
                g.const(i)
        raise
    changed = types[:2] + [(v.dtype, merge_shapes(v.shape, out.shape, f"{node.name}:{k}"), v.kind)
                           for k, (v, out) in enumerate(zip(values, body_g.outputs[1:]))]
    if changed != types:
        try:
            body_g, caps = g.map_to_graph(body, changed, prefix=prefix)
        except ShapeError:
            # typed by the first shapes, shapes taken at run time: right unless the body reads
            # a shape (folded to the first iteration's at conversion)
            if any(n.op_type in ("Shape", "Size") for n in body.nodes):
                raise
    if trip_v is not None and trip_v.dtype != "i64":
        trip_v = g.op("Cast", [trip_v], to="i64")
    outs = g.op("Loop", [trip_v, cond_v, *values, *caps], body=body_g, num_captures=len(caps),
                num_outputs=len(body_g.outputs) - 1)
    return list(outs) if isinstance(outs, tuple) else [outs]


@mapping(ONNX, "Scan", since_opset=9)
def scan(node: OriginNode, g: MapContext) -> Any:
    body: OriginGraph = node.get_attr("body")
    m = int(node.get_attr("num_scan_inputs"))
    inputs = g.inputs()
    n_state = len(inputs) - m
    states: list[Value | None] = inputs[:n_state]
    xs = [v for v in inputs[n_state:] if v is not None]
    in_axes = list(node.get_attr("scan_input_axes", [0] * m))
    in_dirs = list(node.get_attr("scan_input_directions", [0] * m))
    k = len(body.outputs) - n_state
    out_axes = list(node.get_attr("scan_output_axes", [0] * k))
    out_dirs = list(node.get_attr("scan_output_directions", [0] * k))
    axes = [a % len(x.shape) for a, x in zip(in_axes, xs)]
    lengths = {x.shape[a] for x, a in zip(xs, axes)}
    if len(lengths) != 1:
        raise g.error(f"scan inputs have different sequence lengths {sorted(map(str, lengths))}")
    steps = lengths.pop()
    if not isinstance(steps, int) or steps > MAX_UNROLL:
        return _runtime_scan(node, g, body, m, states, xs, axes)
    return _unrolled_scan(g, body, states, xs, axes, in_dirs, out_axes, out_dirs, steps)


def _unrolled_scan(g: MapContext, body: OriginGraph, states: list[Value | None], xs: Sequence[Value],
                   axes: Sequence[int], in_dirs: Sequence[int], out_axes: Sequence[int],
                   out_dirs: Sequence[int], steps: int, tag: str = "") -> list[Value | None]:
    """Scan-9's meaning unrolled: ``steps`` inlined copies of the body on slices of ``xs``."""
    n_state = len(states)
    k = len(body.outputs) - n_state
    per_step: list[list[Value]] = [[] for _ in range(k)]
    for t in range(steps):
        slices = []
        for x, a, d in zip(xs, axes, in_dirs):
            i = steps - 1 - t if d else t
            part = g.op("Slice", [x], starts=[i], ends=[i + 1], axes=[a])
            slices.append(g.op("Squeeze", [part], axes=[a]))
        outs = inline_graph(g, body, [*states, *slices], f"{tag}step{t}")
        states = list(outs[:n_state])
        for j, v in enumerate(outs[n_state:]):
            per_step[j].append(v)
    results: list[Value | None] = list(states)
    for j, parts in enumerate(per_step):
        if not parts:
            raise g.unsupported("a Scan over an empty sequence has scan outputs of unknown shape")
        if out_dirs[j]:
            parts = parts[::-1]
        axis = out_axes[j] % (len(parts[0].shape) + 1)
        stacked = [g.op("Unsqueeze", [v], axes=[axis]) for v in parts]
        results.append(stacked[0] if len(stacked) == 1 else g.op("Concat", stacked, axis=axis))
    return results


@mapping(ONNX, "Scan", since_opset=8)
def scan_8(node: OriginNode, g: MapContext) -> Any:
    """Scan-8: states and scan inputs carry a leading batch axis ([batch, seq, ...]), and
    ``sequence_lens`` (optional) gives each row's length. Each row is unrolled as Scan-9 would
    (on its first ``sequence_lens[b]`` steps; its scan outputs padded with zeros after them, as
    onnxruntime does) and the rows are stacked again on the batch axis."""
    body: OriginGraph = node.get_attr("body")
    m = int(node.get_attr("num_scan_inputs"))
    dirs = list(node.get_attr("directions", [0] * m))
    if m < 1 or len(dirs) != m:
        raise g.error(f"num_scan_inputs {m} with directions {dirs}: needs one direction (0 or 1) "
                      "per scan input, and at least one", attr="directions",
                      hint="give num_scan_inputs >= 1 and one direction per scan input")
    inputs = g.inputs()[1:]
    if len(inputs) < m or any(v is None for v in inputs):
        raise g.error("a state or scan input is absent; ONNX requires every one")
    values = [v for v in inputs if v is not None]
    n_state = len(values) - m
    if len(values[n_state].shape) < 2:
        raise g.error(f"scan input 0 has shape {list(values[n_state].shape)}; scan inputs need "
                      "[batch, seq, ...]", hint="check the Scan's input shapes")
    batch, seq = values[n_state].shape[0], values[n_state].shape[1]
    if any(len(v.shape) < 1 + (i >= n_state) or v.shape[0] != batch or (i >= n_state and v.shape[1] != seq)
           for i, v in enumerate(values)):
        raise g.error(f"states need [batch, ...] and scan inputs [batch, seq, ...] with one batch "
                      f"({batch}) and sequence length ({seq})", hint="check the Scan's input shapes")
    if not isinstance(batch, int):
        raise g.unsupported(f"Scan-8 needs a static batch (have {batch})",
                            hint="fix the graph inputs' batch dim with --input-shape")
    # every row is unrolled: past the limit each row runs a Scan at run time, which takes no
    # sequence_lens (those rows still unroll, one limit a row)
    if not isinstance(seq, int) or seq > MAX_UNROLL or (batch * seq > MAX_UNROLL and not g.has_input(0)):
        return _scan_8_runtime(node, g, body, values, n_state, batch, dirs)
    lens = [seq] * batch
    if g.has_input(0):
        lens = [int(n) for n in np.asarray(g.require_const(0, "sequence_lens")).reshape(-1)]
        if len(lens) != batch or not all(1 <= n <= seq for n in lens):
            raise g.error(f"sequence_lens {lens} needs {batch} lengths in 1..{seq}",
                          hint="give one length per batch row, at most the scan inputs' length")
    rows: list[list[Value | None]] = []
    for b, n in enumerate(lens):
        row = [g.op("Squeeze", [g.op("Slice", [v], starts=[b], ends=[b + 1], axes=[0])], axes=[0])
               for v in values]
        xs = [g.op("Slice", [x], starts=[0], ends=[n], axes=[0]) if n < seq else x for x in row[n_state:]]
        k = len(body.outputs) - n_state
        outs = _unrolled_scan(g, body, list(row[:n_state]), xs, [0] * m, dirs, [0] * k, [0] * k, n,
                              tag=f"row{b}/")
        if n < seq:
            outs[n_state:] = [g.op("Pad", [y], pads=[0, seq - n], axes=[0]) for y in outs[n_state:]
                              if y is not None]
        rows.append(outs)
    return _stack_rows(g, rows)


def _stack_rows(g: MapContext, rows: Sequence[Sequence[Value | None]]) -> list[Value]:
    """The rows' outputs stacked again on a new leading (batch) axis."""
    return [g.op("Concat", [g.op("Unsqueeze", [r[j]], axes=[0]) for r in rows], axis=0)
            if len(rows) > 1 else g.op("Unsqueeze", [rows[0][j]], axes=[0]) for j in range(len(rows[0]))]


def _scan_8_runtime(node: OriginNode, g: MapContext, body: OriginGraph, values: Sequence[Value],
                    n_state: int, batch: int, dirs: Sequence[int]) -> list[Value]:
    """Scan-8 over a sequence too long to unroll (or of run-time length): a Scan-9 node per
    batch row, every row running the whole sequence."""
    if g.has_input(0):
        seq = values[n_state].shape[1]
        what = (f"{batch} rows of {seq} steps, more than the {MAX_UNROLL} unrolled"
                if isinstance(seq, int) else "a sequence length known only at run time")
        raise g.unsupported(f"sequence_lens with {what}",
                            hint="fix the scan inputs' sequence dim with --input-shape, or drop "
                                 "sequence_lens when every row runs the whole sequence")
    m = len(values) - n_state
    rows = []
    for b in range(batch):
        row = [g.op("Squeeze", [g.op("Slice", [v], starts=[b], ends=[b + 1], axes=[0])], axes=[0])
               for v in values]
        rows.append(_runtime_scan(node, g, body, m, row[:n_state], row[n_state:], [0] * m,
                                  directions=dirs, tag=f"row{b}/"))
    return _stack_rows(g, rows)


def _runtime_scan(node: OriginNode, g: MapContext, body: OriginGraph, m: int,
                  states: Sequence[Value | None], xs: Sequence[Value], axes: Sequence[int],
                  directions: Sequence[int] | None = None, tag: str = "") -> Any:
    """A Scan node (a sequence too long to unroll); ``directions`` are Scan-8's, for a row."""
    if any(v is None for v in states) or len(xs) != m:
        raise g.error("a state or scan input is absent; ONNX requires every one")
    given = [v for v in states if v is not None]
    sliced = [(x.dtype, tuple(d for k, d in enumerate(x.shape) if k != a)) for x, a in zip(xs, axes)]
    body_g, caps = g.map_to_graph(body, [*((v.dtype, v.shape) for v in given), *sliced],
                                  prefix=f"{node.name}/{tag}body/")
    k = len(body_g.outputs) - len(given)
    layout = {name: list(node.get_attr(name, [0] * n)) for name, n in (
        ("scan_input_axes", m), ("scan_input_directions", m),
        ("scan_output_axes", k), ("scan_output_directions", k))}
    if directions is not None:
        layout["scan_input_directions"] = list(directions)
    outs = g.op("Scan", [*given, *xs, *caps], body=body_g, num_scan_inputs=m,
                num_captures=len(caps), num_outputs=len(body_g.outputs), **layout)
    return list(outs) if isinstance(outs, tuple) else [outs]
