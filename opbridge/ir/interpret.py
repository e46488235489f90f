"""The reference interpreter: runs a Graph node by node with each op's numpy compute."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..errors import InterpretError, OpbridgeError
from . import dims as _dims
from .graph import Graph, Node, Value
from .opdef import OpDef
from .types import format_shape, to_numpy_dtype


def check_feeds(graph: Graph, feeds: Mapping[str, Any],
                dims: dict[str, int] | None = None) -> dict[str, Any]:
    """Check feeds against the graph inputs (names, shapes, dtypes); returns them as arrays
    (a sequence as a list of arrays, an empty optional as None).

    Symbolic input dims take the fed sizes; ``dims`` collects them (name -> size) for the run."""
    dims = {} if dims is None else dims
    if not isinstance(feeds, Mapping):
        raise InterpretError(f"feeds must be a dict of input name -> array, not a {type(feeds).__name__}",
                             hint=f"pass {{{', '.join(repr(v.name) + ': array' for v in graph.inputs)}}}")
    names = [v.name for v in graph.inputs]
    unknown = sorted(set(feeds) - set(names))
    if unknown:
        raise InterpretError(
            f"graph '{graph.name}' has no input named '{unknown[0]}'",
            hint=f"its inputs are: {', '.join(names)}",
        )
    out: dict[str, Any] = {}
    for v in graph.inputs:
        if v.name not in feeds:
            raise InterpretError(
                f"graph input '{v.name}' ({v.dtype}{format_shape(v.shape)}) was not fed",
                hint=f"pass {{'{v.name}': array}}",
            )
        if v.kind != "tensor":
            out[v.name] = _container_feed(v, feeds[v.name])
            continue
        arr = _fed_array(v, feeds[v.name], f"graph input '{v.name}'")
        if arr.ndim != len(v.shape) or _dims.bind_shape(v.shape, arr.shape, dims) is not None:
            bound = f" (with {_dims.sizes_text(dims)})" if dims else ""
            raise InterpretError(
                f"graph input '{v.name}' wants shape {format_shape(v.shape)}, got "
                f"{format_shape(arr.shape)}{bound}",
                hint="reshape the input, or convert the model with --input-shape",
            )
        out[v.name] = arr
    return out


def _fed_array(v: Value, fed: Any, what: str) -> np.ndarray:
    """``fed`` (an array or anything numpy makes one of) as an array of ``v``'s dtype: cast
    when the kinds agree or the cast is safe (f64 -> f32, i64 -> i32, bool -> f32), else an
    InterpretError naming ``what`` and the dtype wanted."""
    want = to_numpy_dtype(v.dtype)
    try:
        arr = np.asarray(fed)
    except (ValueError, TypeError) as err:  # ragged nested lists, objects numpy cannot hold
        raise InterpretError(f"{what} wants an array of {v.dtype}; got a {type(fed).__name__} "
                             f"numpy cannot make one array of ({err})",
                             hint="feed a numpy array (nested lists must be rectangular)") from None
    if arr.dtype == want:
        return arr
    if arr.dtype != object and (np.can_cast(arr.dtype, want, casting="same_kind")
                                or arr.dtype.kind == want.kind):
        return arr.astype(want)
    raise InterpretError(f"{what} wants {v.dtype}, got {arr.dtype}",
                         hint=f"cast the array: x.astype(np.{want.name})")


def _container_feed(v: Value, fed: Any) -> Any:
    """A fed sequence (a list of arrays) or optional (None, an array, or a list for an optional
    sequence), its tensors cast to the value's dtype as a tensor feed's are."""
    what = f"graph input '{v.name}' (a {v.kind} of {v.dtype})"
    sequence = v.kind in ("sequence", "optional_sequence")
    if fed is None:
        if v.kind.startswith("optional"):
            return None
        raise InterpretError(f"{what} was fed None",
                             hint=f"feed a list of {v.dtype} arrays (an empty list for no tensors)")
    if not sequence:
        return _fed_array(v, fed, what)
    if not isinstance(fed, (list, tuple)):
        raise InterpretError(f"{what} was fed a {type(fed).__name__}",
                             hint=f"feed a list of {v.dtype} arrays"
                                  + (", or None for an empty optional" if v.kind.startswith("optional")
                                     else ""))
    return [_fed_array(v, a, f"item {i} of {what}") for i, a in enumerate(fed)]


def _checked_container(node: Node, v: Value, result: Any) -> Any:
    """A sequence or optional result: a list of arrays of the value's dtype, an array, or None
    (an empty optional)."""
    want = to_numpy_dtype(v.dtype)
    items = result if isinstance(result, list) else [] if result is None else [result]
    if (result is None and not v.kind.startswith("optional")) or (
            isinstance(result, list) != v.kind.endswith("sequence") and result is not None):
        raise InterpretError(f"{node.where}: compute returned {type(result).__name__} for the "
                             f"{v.kind} '{v.name}'", hint=_compute_hint(node, "a list of arrays for a "
                             "sequence, an array or None for an optional"))
    for a in items:
        if not isinstance(a, np.ndarray) or a.dtype != want:
            got = a.dtype if isinstance(a, np.ndarray) else type(a).__name__
            raise InterpretError(f"{node.where}: a tensor of the {v.kind} '{v.name}' is {got}; "
                                 f"the op's definition promises {v.dtype}",
                                 hint=_compute_hint(node, f"arrays of {v.dtype}"))
    return result


def _compute_hint(node: Node, want: str) -> str:
    """What to fix when an op's compute returns what its definition does not promise."""
    return (f"the compute function of op {node.op} (define_op(\"{node.op}\").compute(fn), in a "
            f"plugin if not built in) must return {want}")


def run_node(graph: Graph, node: Node, args: list[Any],
             dims: dict[str, int] | None = None) -> list[Any]:
    """Run one node's compute; the results are checked against the node's declared outputs
    (symbolic dims against the sizes ``dims`` holds for this run, binding the new ones)."""
    opdef = graph.registry.get(node.op)
    if opdef.compute_function is None:
        raise InterpretError(
            f"{node.where}: op has no compute function",
            hint="give its define_op a .compute(fn)",
        )
    try:
        result = opdef.compute_function(*args, **node.attrs)
    except OpbridgeError as err:
        if not err.location:  # a compute's own error (a Loop over its limit): name the node
            err.add_context(node=node.name, op_type=node.op)
        raise
    except Exception as err:
        shapes = ", ".join(
            f"{a.dtype}{format_shape(a.shape)}" if a is not None else "None" for a in args
        )
        raise InterpretError(
            f"{node.where}: compute failed on inputs ({shapes}): {type(err).__name__}: {err}",
            hint="check the values fed to the graph (an index out of range, a shape the model does "
                 "not take); if the op is a plugin's, its compute function failed: --debug shows "
                 "the traceback",
        ) from err
    # several outputs come as a tuple (or a list); one sequence output is itself a list
    one_sequence = len(node.outputs) == 1 and node.outputs[0].kind.endswith("sequence")
    if isinstance(result, tuple) or (isinstance(result, list) and not one_sequence):
        results = list(result)
    else:
        results = [result]
    if len(results) != len(node.outputs):
        raise InterpretError(
            f"{node.where}: compute returned {len(results)} outputs, the node has {len(node.outputs)}",
            hint=_compute_hint(node, "a tuple with one array per output"),
        )
    return [checked_result(node.where, opdef, i, v.name, v.dtype, _run_shape(v.shape, r, dims), r)
            if v.kind == "tensor" else _checked_container(node, v, r)
            for i, (v, r) in enumerate(zip(node.outputs, results))]


#: True while a sub-graph runs (an If branch, a Loop or Scan body): its values were typed
#: from the shapes seen at conversion, and a loop-carried value may change shape from one
#: iteration to the next, so their shapes are taken at run time (dtype and rank still checked).
_RUNTIME_SHAPES: ContextVar[bool] = ContextVar("opbridge_runtime_shapes", default=False)

#: The most iterations a Loop may run (``interpret(max_loop_iterations=...)``, else the
#: environment variable ``OPBRIDGE_MAX_LOOP_ITERATIONS``, else :data:`MAX_LOOP_ITERATIONS`).
_LOOP_LIMIT: ContextVar[int | None] = ContextVar("opbridge_loop_limit", default=None)
MAX_LOOP_ITERATIONS = 100_000


def loop_limit() -> int:
    """The iteration limit of a Loop in this run (see :data:`_LOOP_LIMIT`)."""
    limit = _LOOP_LIMIT.get()
    if limit is not None:
        return limit
    env = os.environ.get("OPBRIDGE_MAX_LOOP_ITERATIONS")
    if env:
        try:
            return int(env)
        except ValueError:
            raise InterpretError(f"OPBRIDGE_MAX_LOOP_ITERATIONS={env!r} is not an integer",
                                 hint="set it to the most iterations a Loop may run") from None
    return MAX_LOOP_ITERATIONS


def _run_shape(shape: tuple[Any, ...], result: Any, dims: dict[str, int] | None) -> tuple[Any, ...]:
    """The declared ``shape`` with its symbolic dims resolved for this run: sizes bound so far,
    and the result's own size for a dim first seen here (a run-time count)."""
    got = np.shape(result)
    if _RUNTIME_SHAPES.get() and len(got) == len(shape):
        return tuple(got)  # inside a sub-graph: any shape of the declared rank
    if all(isinstance(d, int) for d in shape):
        return tuple(shape)
    values = {} if dims is None else dims
    if len(got) != len(shape):
        return tuple(shape)  # checked_result reports the rank
    _dims.bind_shape(shape, got, values)
    resolved = [_dims.evaluate(d, values) for d in shape]
    # a dim not resolvable from what is bound (a product of two new names) takes the result's size
    return tuple(got[i] if r is None else r for i, r in enumerate(resolved))


def run_subgraph(graph: Graph, args: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """Run a sub-graph (a control-flow op's branch or body) on positional inputs; returns its
    outputs in order. Shapes are those of the run (see :data:`_RUNTIME_SHAPES`)."""
    if len(args) != len(graph.inputs):
        raise InterpretError(f"sub-graph '{graph.name}' takes {len(graph.inputs)} inputs, "
                             f"{len(args)} given")
    token = _RUNTIME_SHAPES.set(True)
    try:
        env: dict[int, Any] = {id(c): c.data for c in graph.constants.values()}
        for v, a in zip(graph.inputs, args):
            env[id(v)] = a
        for node in graph.nodes:
            ins = [env[id(v)] if v is not None else None for v in node.inputs]
            for v, arr in zip(node.outputs, run_node(graph, node, ins)):
                env[id(v)] = arr
        return [env[id(v)] for v in graph.outputs]
    finally:
        _RUNTIME_SHAPES.reset(token)


def checked_result(
    where: str,
    opdef: OpDef | None,
    index: int,
    name: str,
    dtype: str,
    shape: tuple[Any, ...],
    result: Any,
    *,
    part: str = "",
    error: type[OpbridgeError] = InterpretError,
) -> np.ndarray:
    """Output ``index`` of a compute (named ``name``), checked against what the op's definition
    promised for it: dtype ``dtype`` and shape ``shape`` (the shape function's, or a tile's).

    A wrong dtype is an error, never a silent cast: a compute that returns float64 for a float32
    output usually mixed in a float64 array or scalar, and the cast would hide that it computes
    in another precision than the target will. ``part`` says what was computed ("a tile of "),
    ``error`` the class raised (the simulator raises its own).
    """
    arr = np.asarray(result)
    if arr.dtype != to_numpy_dtype(dtype) or tuple(arr.shape) != tuple(shape):
        port = opdef.outputs[min(index, len(opdef.outputs) - 1)] if opdef and opdef.outputs else None
        of_type = ""
        if port is not None:
            typed = f"{port.type} = {dtype}" if port.type != dtype else dtype
            of_type = f" (its output '{port.name}': {typed})"
        promised = f"{dtype}{format_shape(shape)}"
        got = f"{_dtype_text(arr.dtype)}{format_shape(arr.shape)}"
        if arr.dtype != to_numpy_dtype(dtype):
            hint = (f"return {dtype} from the compute, e.g. `return y.astype(np.{to_numpy_dtype(dtype).name})`, "
                    "and look for a float64 array or scalar mixed into the computation")
        else:
            hint = "the op's compute and its shape function disagree"
        raise error(
            f"{where}: compute returned {got} for {part}output '{name}'; the op's definition "
            f"promises {promised}{of_type}",
            hint=hint,
        )
    return arr


def _dtype_text(dt: np.dtype[Any]) -> str:
    """The IR name of a numpy dtype where it has one (f64), else numpy's (object)."""
    from .types import from_numpy_dtype

    try:
        return from_numpy_dtype(dt)
    except OpbridgeError:
        return str(dt)


def interpret(
    graph: Graph,
    feeds: Mapping[str, Any],
    *,
    keep_intermediates: bool = False,
    stop_after: str | None = None,
    dump_layers: str | None = None,
    threads: int | None = None,
    max_loop_iterations: int | None = None,
    dump: str | None = None,
) -> dict[str, np.ndarray]:
    """Run ``graph`` on ``feeds``; returns graph-output name -> array, in graph-output order.

    ``keep_intermediates`` adds every named tensor. ``stop_after`` (a node name, or its origin
    name) stops after that node and returns what has been computed. ``dump_layers`` (or the
    environment variable ``OPBRIDGE_DEBUG`` set to a path or ``1``; the name of ``validate
    --dump-layers``) writes every node's inputs and outputs to an ``.npz`` (``dump=``, its
    former name, still works with a DeprecationWarning). ``threads`` is the number of BLAS threads for the run
    (default: ``OPBRIDGE_NUM_THREADS``, else 1; 0 leaves BLAS its own setting; see
    :mod:`opbridge.threads`). ``max_loop_iterations`` bounds every run-time Loop (default:
    ``OPBRIDGE_MAX_LOOP_ITERATIONS``, else 100000); a Loop that would run longer is an
    InterpretError naming it.
    """
    from ..renamed import renamed_keyword
    from ..threads import blas_threads

    dump_layers = renamed_keyword("interpret", ("dump_layers", dump_layers), ("dump", dump),
                                  cli="validate --dump-layers", error=InterpretError)
    token = _LOOP_LIMIT.set(max_loop_iterations)
    try:
        with blas_threads(threads):
            return _interpret(graph, feeds, keep_intermediates=keep_intermediates,
                              stop_after=stop_after, dump=dump_layers)
    finally:
        _LOOP_LIMIT.reset(token)


def _last_uses(graph: Graph) -> dict[int, int]:
    """id(value) -> index of the last node reading it, for values that may be dropped then
    (graph outputs never are)."""
    last: dict[int, int] = {}
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            if v is not None:
                last[id(v)] = i
    for v in graph.outputs:
        last.pop(id(v), None)
    return last


def _interpret(
    graph: Graph,
    feeds: Mapping[str, Any],
    *,
    keep_intermediates: bool,
    stop_after: str | None,
    dump: str | None,
) -> dict[str, np.ndarray]:
    env = os.environ.get("OPBRIDGE_DEBUG")
    if dump is None and env and env != "0":
        dump = env if env.endswith(".npz") else f"{graph.name}_debug.npz"
    env_stop = os.environ.get("OPBRIDGE_STOP_AFTER")
    if stop_after is None and env_stop:
        stop_after = env_stop
    if stop_after is not None and not any(
        n.name == stop_after or n.origin.name == stop_after for n in graph.nodes
    ):
        raise InterpretError(f"stop_after: graph '{graph.name}' has no node named '{stop_after}'",
                             hint="give an IR node name or its origin layer name ('opbridge show' "
                             "lists them; OPBRIDGE_STOP_AFTER sets it too)")
    # without intermediates to return, a tensor is dropped after its last reader, so memory
    # is what is live at once, not every tensor of the run
    keep_all = keep_intermediates or stop_after is not None
    last_use = {} if keep_all else _last_uses(graph)
    env_vals: dict[int, Any] = {}
    named: dict[str, Any] = {}
    dims: dict[str, int] = {}  # symbolic dim -> its size in this run
    for name, arr in check_feeds(graph, feeds, dims).items():
        v = next(x for x in graph.inputs if x.name == name)
        env_vals[id(v)] = arr
        named[name] = arr
    for c in graph.constants.values():
        assert c.data is not None
        env_vals[id(c)] = c.data
    dumped: dict[str, np.ndarray] = {}
    stopped = False
    for index, node in enumerate(graph.nodes):
        args: list[np.ndarray | None] = []
        for inp in node.inputs:
            if inp is None:
                args.append(None)
            else:
                try:
                    args.append(env_vals[id(inp)])
                except KeyError:
                    raise InterpretError(
                        f"{node.where}: input '{inp.name}' has no value yet (graph not verified?)"
                    ) from None
        outs = run_node(graph, node, args, dims)
        for v, arr in zip(node.outputs, outs):
            env_vals[id(v)] = arr
            if keep_all:
                named[v.name] = arr
        for inp in node.inputs:
            if inp is not None and last_use.get(id(inp)) == index:
                env_vals.pop(id(inp), None)  # pop: a node may read one tensor twice
        if dump:  # tensors only: a sequence or optional has no one array to write
            for i, a in enumerate(args):
                if isinstance(a, np.ndarray):
                    dumped[f"{node.name}/in{i}"] = a
            for v, a in zip(node.outputs, outs):
                if isinstance(a, np.ndarray):
                    dumped[f"{node.name}/out:{v.name}"] = a
        if stop_after is not None and stop_after in (node.name, node.origin.name):
            stopped = True
            break
    if dump:
        # IR tensors are numeric or bool, so nothing needs pickling; naming allow_pickle also
        # keeps it out of reach of the tensor names (they all contain '/')
        np.savez(dump, allow_pickle=False, **dumped)
    result: dict[str, np.ndarray] = {}
    for v in graph.outputs:
        if id(v) in env_vals:
            result[v.name] = env_vals[id(v)]
        elif not stopped:
            raise InterpretError(f"graph output '{v.name}' was never computed")
    if keep_intermediates or stopped:
        for k, a in named.items():
            result.setdefault(k, a)
    return result
