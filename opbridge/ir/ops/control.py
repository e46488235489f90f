"""Run-time control flow: If, Loop and Scan whose branch or trip count is known only at run time.

Their branches and bodies are IR sub-graphs held as ``graph`` parameters. A sub-graph is
closed: every value it reads from the enclosing graph is one of its inputs, and the node
passes that value in (its "captures", after the ONNX operands), so a sub-graph saves, loads,
verifies and runs on its own. ONNX semantics otherwise:
https://onnx.ai/onnx/operators/onnx__If.html, onnx__Loop.html, onnx__Scan.html.

A sub-graph's values are typed from the shapes seen at conversion; at run time the
interpreter takes their shapes from the data (a loop-carried value may grow each iteration),
and a node output whose shape differs between the branches, or between a Loop's first and
later iterations, has a symbolic dim there (named after the node).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import InterpretError
from ..interpret import loop_limit, run_subgraph
from ..opdef import ShapeContext, define_op
from ..types import Shape, to_numpy_dtype


def merge_shapes(a: Shape, b: Shape, name: str) -> Shape:
    """One shape for a value that is ``a`` at one time and ``b`` at another: their common dims,
    a symbolic dim ``<name>.d<axis>`` where they differ (``b``'s rank, every dim symbolic, if
    the ranks differ: a sequence's tensors, known only once something is inserted)."""
    if len(a) != len(b):
        return tuple(f"{name}.d{j}" for j in range(len(b)))
    return tuple(x if x == y else f"{name}.d{j}" for j, (x, y) in enumerate(zip(a, b)))


def _out_kinds(attr: str, first: int = 0) -> Any:
    """A kind function: the outputs are of the kinds of sub-graph ``attr``'s outputs from
    ``first`` on."""
    return lambda kinds, attrs, n: [v.kind for v in attrs[attr].outputs[first:first + n]]


def _check_inputs(ctx: ShapeContext, graph: Any, attr: str, given: Sequence[tuple[Shape, str]]) -> None:
    if len(graph.inputs) != len(given):
        raise ctx.error(f"sub-graph '{graph.name}' takes {len(graph.inputs)} inputs, the node "
                        f"passes {len(given)}", attr=attr)
    for v, (_, dtype) in zip(graph.inputs, given):
        if v.dtype != dtype:
            raise ctx.error(f"sub-graph input '{v.name}' is {v.dtype}, the node passes {dtype}",
                            attr=attr,
                            hint="the node passes each sub-graph input the dtype the sub-graph declares: "
                                 "correct the model")


def _given(ctx: ShapeContext, first: int) -> list[tuple[Shape, str]]:
    return [(ctx.input_shape(i), ctx.input_dtype(i)) for i in range(first, ctx.num_inputs)]


def _scalar(x: np.ndarray | None, default: Any = None) -> Any:
    return default if x is None else np.asarray(x).reshape(-1)[0]


# -- If ----------------------------------------------------------------------------------
def _if_shape(ctx: ShapeContext) -> Any:
    then, other = ctx.attr("then_branch"), ctx.attr("else_branch")
    given = _given(ctx, 1)
    _check_inputs(ctx, then, "then_branch", given)
    _check_inputs(ctx, other, "else_branch", given)
    if len(then.outputs) != len(other.outputs):
        raise ctx.error(f"then_branch has {len(then.outputs)} outputs, else_branch "
                        f"{len(other.outputs)}", attr="else_branch",
                        hint="both branches must give the same number of outputs: correct the model")
    outs = []
    for k, (a, b) in enumerate(zip(then.outputs, other.outputs)):
        if a.dtype != b.dtype or a.kind != b.kind:
            raise ctx.error(f"output {k} is {a.kind} {a.dtype} in then_branch but {b.kind} "
                            f"{b.dtype} in else_branch", attr="else_branch",
                            hint="both branches must give each output with one kind and dtype: correct the "
                                 "model")
        outs.append((merge_shapes(a.shape, b.shape, f"{ctx.node_name}:{k}"), a.dtype))
    return outs


def _if(cond: np.ndarray, *captures: np.ndarray, then_branch: Any,
        else_branch: Any) -> tuple[np.ndarray, ...]:
    return tuple(run_subgraph(then_branch if bool(_scalar(cond)) else else_branch, captures))


(
    define_op("If")
    .doc("Run `then_branch` when `cond` is true, else `else_branch`, on the `captures` (the "
         "values the branches read from the enclosing graph); outputs are the branch's.")
    .input("cond", "bool").input("captures", "V", variadic=True, kind="any")
    .output("outputs", "V", variadic=True, kind="any")
    .param("then_branch", "graph").param("else_branch", "graph")
    .kinds(_out_kinds("then_branch"))
    .placement("cpu")
    .shape_fn(_if_shape)
    .compute(_if)
)


# -- Loop --------------------------------------------------------------------------------
def _loop_shape(ctx: ShapeContext) -> Any:
    body, n_caps = ctx.attr("body"), ctx.attr("num_captures")
    n_carried = ctx.num_inputs - 2 - n_caps
    if n_carried < 0:
        raise ctx.error(f"{ctx.num_inputs - 2} values given, fewer than num_captures {n_caps}",
                        attr="num_captures")
    _check_inputs(ctx, body, "body", [((), "i64"), ((), "bool"), *_given(ctx, 2)])
    if len(body.outputs) < 1 + n_carried:
        raise ctx.error(f"body has {len(body.outputs)} outputs; it must give the condition and "
                        f"{n_carried} loop-carried values", attr="body")
    outs = []
    for k in range(n_carried):
        init, last = ctx.input_shape(2 + k), body.outputs[1 + k]
        if last.dtype != ctx.input_dtype(2 + k):
            raise ctx.error(f"loop-carried value {k} enters as {ctx.input_dtype(2 + k)} but the "
                            f"body gives {last.dtype}", attr="body",
                            hint="the body must give each loop-carried value the dtype it enters with: "
                                 "correct the model")
        outs.append((merge_shapes(init, last.shape, f"{ctx.node_name}:{k}"), last.dtype))
    for v in body.outputs[1 + n_carried:]:
        outs.append(((f"{ctx.node_name}.iterations", *v.shape), v.dtype))
    return outs


def _loop(m: np.ndarray | None, cond: np.ndarray | None, *values: np.ndarray, body: Any,
          num_captures: int) -> tuple[np.ndarray, ...]:
    n_carried = len(values) - num_captures
    carried, caps = list(values[:n_carried]), list(values[n_carried:])
    trip = None if m is None else int(_scalar(m))
    go = bool(_scalar(cond, True))
    limit = loop_limit()
    scans: list[list[np.ndarray]] = [[] for _ in body.outputs[1 + n_carried:]]
    i = 0
    while go and (trip is None or i < trip):
        if i >= limit:
            raise InterpretError(
                f"the loop has run {limit} iterations, its limit, and would run more (trip count "
                f"{'none' if trip is None else trip}, condition still true)",
                hint="raise the limit: interpret(..., max_loop_iterations=N) or "
                     "OPBRIDGE_MAX_LOOP_ITERATIONS=N; or check what computes the condition")
        outs = run_subgraph(body, [np.array(i, np.int64), np.array(go), *carried, *caps])
        go = bool(_scalar(outs[0]))
        carried = outs[1:1 + n_carried]
        for k, v in enumerate(outs[1 + n_carried:]):
            scans[k].append(v)
        i += 1
    stacked = []
    for v, parts in zip(body.outputs[1 + n_carried:], scans):
        if parts:
            stacked.append(np.stack(parts))
        else:  # no iteration: an empty stack of the body's (conversion-time) shape
            dims = [d if isinstance(d, int) else 0 for d in v.shape]
            stacked.append(np.zeros((0, *dims), to_numpy_dtype(v.dtype)))
    return (*carried, *stacked)


(
    define_op("Loop")
    .doc("Run `body` while the trip count `M` (absent: none) is not reached and the condition "
         "holds; `values` are the loop-carried values, then `num_captures` values the body reads "
         "from the enclosing graph. Outputs: the final loop-carried values, then each scan "
         "output stacked over the iterations. The iterations are bounded (interpret's "
         "max_loop_iterations, OPBRIDGE_MAX_LOOP_ITERATIONS).")
    .input("M", "i64", optional=True).input("cond", "bool", optional=True)
    .input("values", "V", variadic=True, kind="any")
    .output("outputs", "V", variadic=True, kind="any")
    .param("body", "graph").param("num_captures", "int", default=0, minimum=0)
    .kinds(_out_kinds("body", 1))
    .placement("cpu")
    .shape_fn(_loop_shape)
    .compute(_loop)
)


# -- Scan --------------------------------------------------------------------------------
def scan_layout(n_scans: int, n_outs: int, attrs: dict[str, Any]) -> tuple[list[int], ...]:
    """The four per-input/per-output axis and direction lists of a Scan with ``n_scans`` scan
    inputs and ``n_outs`` scan outputs (its state values take none), zeros where absent."""
    def full(name: str, n: int) -> list[int]:
        v = list(attrs[name])
        return v if v else [0] * n

    return (full("scan_input_axes", n_scans), full("scan_input_directions", n_scans),
            full("scan_output_axes", n_outs), full("scan_output_directions", n_outs))


def _scan_shape(ctx: ShapeContext) -> Any:
    body, m, n_caps = ctx.attr("body"), ctx.attr("num_scan_inputs"), ctx.attr("num_captures")
    n_states = ctx.num_inputs - m - n_caps
    if n_states < 0:
        raise ctx.error(f"{ctx.num_inputs} inputs, fewer than the scan inputs and captures",
                        attr="num_scan_inputs")
    attrs = {k: ctx.attr(k) for k in ("scan_input_axes", "scan_input_directions",
                                      "scan_output_axes", "scan_output_directions")}
    in_axes, _, out_axes, _ = scan_layout(m, len(body.outputs) - n_states, attrs)
    xs = [ctx.input_shape(n_states + j) for j in range(m)]
    axes = [ctx.normalize_axis(a, len(x), "scan_input_axes") for a, x in zip(in_axes, xs)]
    sliced = [(tuple(d for k, d in enumerate(x) if k != a), ctx.input_dtype(n_states + j))
              for j, (x, a) in enumerate(zip(xs, axes))]
    _check_inputs(ctx, body, "body", [*_given(ctx, 0)[:n_states], *sliced,
                                      *_given(ctx, n_states + m)])
    steps = xs[0][axes[0]] if xs else 0
    outs = [(merge_shapes(ctx.input_shape(k), body.outputs[k].shape, f"{ctx.node_name}:{k}"),
             body.outputs[k].dtype) for k in range(n_states)]
    for j, v in enumerate(body.outputs[n_states:]):
        axis = ctx.normalize_axis(out_axes[j], len(v.shape) + 1, "scan_output_axes")
        shape = list(v.shape)
        shape.insert(axis, steps)
        outs.append((tuple(shape), v.dtype))
    return outs


def _scan(*values: np.ndarray, body: Any, num_scan_inputs: int, num_captures: int,
          **layout: Any) -> tuple[np.ndarray, ...]:
    n_states = len(values) - num_scan_inputs - num_captures
    states = list(values[:n_states])
    xs = values[n_states:n_states + num_scan_inputs]
    caps = list(values[n_states + num_scan_inputs:])
    n_outs = len(body.outputs) - n_states
    in_axes, in_dirs, out_axes, out_dirs = scan_layout(num_scan_inputs, n_outs, layout)
    axes = [a % x.ndim for a, x in zip(in_axes, xs)]
    steps = xs[0].shape[axes[0]] if xs else 0
    per_step: list[list[np.ndarray]] = [[] for _ in range(n_outs)]
    for t in range(steps):
        slices = [np.take(x, steps - 1 - t if d else t, axis=a) for x, a, d in zip(xs, axes, in_dirs)]
        outs = run_subgraph(body, [*states, *slices, *caps])
        states = outs[:n_states]
        for j, v in enumerate(outs[n_states:]):
            per_step[j].append(v)
    results = list(states)
    for j, (v, parts) in enumerate(zip(body.outputs[n_states:], per_step)):
        axis = out_axes[j] % (len(v.shape) + 1)
        if not parts:
            dims = [d if isinstance(d, int) else 0 for d in v.shape]
            dims.insert(axis, 0)
            results.append(np.zeros(dims, to_numpy_dtype(v.dtype)))
            continue
        results.append(np.stack(parts[::-1] if out_dirs[j] else parts, axis=axis))
    return tuple(results)


(
    define_op("Scan")
    .doc("Run `body` once per slice of the scan inputs along their axes; `values` are the "
         "state values, then `num_scan_inputs` scan inputs, then `num_captures` values the "
         "body reads from the enclosing graph. Outputs: the final states, then each scan "
         "output stacked along its axis.")
    .input("values", "V", variadic=True)
    .output("outputs", "V", variadic=True)
    .param("body", "graph").param("num_scan_inputs", "int", minimum=1)
    .param("num_captures", "int", default=0, minimum=0)
    .param("scan_input_axes", "ints", default=()).param("scan_input_directions", "ints", default=())
    .param("scan_output_axes", "ints", default=()).param("scan_output_directions", "ints", default=())
    .placement("cpu")
    .shape_fn(_scan_shape)
    .compute(_scan)
)
