"""ONNX control flow made static: If with a constant condition, Loop and Scan unrolled.

The IR is a static dataflow graph, so a subgraph is inlined with ``g.map_subgraph`` (the same
public hook a plugin uses): its nodes are mapped through the registry like the model's own, its
tensors renamed under the node's name, and names it takes from the enclosing graph resolved there.

- If-1..21: the condition must be constant (after folding); the taken branch is inlined.
- Loop-1..21: the trip count (and the condition, at every iteration) must be constant;
  loop-carried values flow between copies of the body, scan outputs are concatenated.
- Scan-9..21: the sequence length is static; each step inlines the body on slices of the
  scan inputs (axes and directions honoured) and stacks the scan outputs.

Sequence and optional values are not IR values: bodies that use them are reported unsupported.
Spec: https://onnx.ai/onnx/operators/onnx__Scan.html (and If, Loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir.graph import Value
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
        g.const(0)  # records which graph inputs would make it constant
    taken = "then_branch" if bool(_scalar(g, cond, "the condition")) else "else_branch"
    return inline_graph(g, node.get_attr(taken), [], taken)


@mapping(ONNX, "Loop", since_opset=1)
def loop(node: OriginNode, g: MapContext) -> Any:
    body: OriginGraph = node.get_attr("body")
    trip_v, cond_v = g.input(0), g.input(1)
    if trip_v is not None and trip_v.data is None:
        g.const(0)
    if cond_v is not None and cond_v.data is None:
        g.const(1)
    trip = _scalar(g, trip_v, "the trip count M")
    cond = _scalar(g, cond_v, "the condition")
    if trip is None and cond is None:
        raise g.unsupported("a Loop without trip count or condition runs forever")
    limit = int(trip) if trip is not None else MAX_UNROLL
    if limit > MAX_UNROLL:
        raise g.unsupported(f"trip count {limit} is above the unroll limit {MAX_UNROLL}")
    carried: list[Value | None] = [g.input(i) for i in range(2, g.num_inputs)]
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
    lengths = {int(x.shape[a]) for x, a in zip(xs, axes)}
    if len(lengths) != 1:
        raise g.error(f"scan inputs have different sequence lengths {sorted(lengths)}")
    steps = lengths.pop()
    if steps > MAX_UNROLL:
        raise g.unsupported(f"sequence length {steps} is above the unroll limit {MAX_UNROLL}")
    per_step: list[list[Value]] = [[] for _ in range(k)]
    for t in range(steps):
        slices = []
        for x, a, d in zip(xs, axes, in_dirs):
            i = steps - 1 - t if d else t
            part = g.op("Slice", [x], starts=[i], ends=[i + 1], axes=[a])
            slices.append(g.op("Squeeze", [part], axes=[a]))
        outs = inline_graph(g, body, [*states, *slices], f"step{t}")
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
