"""The verifier: structural, attribute, dtype and shape checks of a Graph.

Every problem is an OpbridgeError naming the node, the op and the attribute or input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np

from ..errors import AttrError, GraphError, OpbridgeError, ShapeError, UnsupportedOpError
from . import types as ir_types
from .types import INT_DTYPES, format_shape, from_numpy_dtype, is_dtype, is_static, to_numpy_dtype

if TYPE_CHECKING:
    from .graph import Graph, Node, Value


def verify(graph: Graph, *, require_static: bool = True) -> None:
    _check_names(graph)
    _check_order(graph)
    if require_static:
        for v in graph.inputs:
            if v.kind == "tensor" and not is_static(v.shape):  # a sequence's tensors may vary
                raise ShapeError(
                    f"graph input '{v.name}' has symbolic shape {format_shape(v.shape)}",
                    hint=f"fix it with --input-shape {v.name}=1,3,224,224 "
                    f"(input_shapes={{'{v.name}': (...)}} in Python)",
                )
    for c in graph.constants.values():
        if c.data is None:
            raise GraphError(f"constant '{c.name}' has no data")
        if from_numpy_dtype(c.data.dtype) != c.dtype or tuple(c.data.shape) != c.shape:
            raise ShapeError(
                f"constant '{c.name}' is declared {c.dtype}{format_shape(c.shape)} "
                f"but holds {c.data.dtype}{format_shape(c.data.shape)}"
            )
    for v in graph.inputs:
        _check_size(v.shape, f"graph input '{v.name}'")
    for node in graph.nodes:
        _check_node(graph, node)
        for v in node.outputs:
            _check_size(v.shape, f"{node.where}: output '{v.name}'")
    for v in graph.outputs:
        if not is_dtype(v.dtype):
            raise ShapeError(f"graph output '{v.name}' has unknown dtype {v.dtype!r}")
    for v in graph.values().values():
        if v.quant is not None:
            _check_quant(v)


def _check_quant(v: Value) -> None:
    """A value's QuantParams against the value: an integer dtype, zero points in its range, a
    channel axis in its rank with one scale per channel."""
    q = v.quant
    assert q is not None
    what = f"value '{v.name}' ({v.dtype}{format_shape(v.shape)}) quant params"
    dt = to_numpy_dtype(v.dtype)
    if v.dtype not in INT_DTYPES + ("i4", "u4", "i2", "u2"):
        raise GraphError(f"{what}: only integer values carry a scale and zero point",
                         hint="drop Value.quant or give the value an integer dtype")
    info = ml_dtypes.iinfo(dt) if v.dtype in ("i4", "u4", "i2", "u2") else np.iinfo(dt)
    if np.any(q.zero_point < int(info.min)) or np.any(q.zero_point > int(info.max)):
        raise GraphError(f"{what}: zero point outside {v.dtype}'s range [{info.min}, {info.max}]")
    if q.axis is not None:
        if not -v.rank <= q.axis < v.rank:
            raise GraphError(f"{what}: axis {q.axis} is out of range for rank {v.rank}")
        dim = v.shape[q.axis]
        if isinstance(dim, int) and q.scale.size != dim:
            raise GraphError(f"{what}: {q.scale.size} scales for {dim} entries along axis {q.axis}")


def _check_size(shape: tuple[Any, ...], what: str) -> None:
    """Refuse a static shape whose non-zero dims multiply past ``types.MAX_ELEMENTS``: even an
    empty (0, 2^62) array cannot be described by numpy, so nothing could run it."""
    n = 1
    for d in shape:
        if isinstance(d, int):
            n *= d or 1
    if n > ir_types.MAX_ELEMENTS:
        raise ShapeError(f"{what} has shape {format_shape(shape)}, too large (the limit is "
                         f"{ir_types.MAX_ELEMENTS} elements)",
                         hint="check the model's declared shapes; raise opbridge.ir.types.MAX_ELEMENTS "
                         "if it is real")


def _check_names(graph: Graph) -> None:
    seen: dict[str, str] = {}

    def claim(name: str, what: str) -> None:
        if not isinstance(name, str) or not name:
            raise GraphError(f"{what} has an empty or non-string name {name!r}")
        if name in seen:
            raise GraphError(
                f"value name '{name}' is used twice ({seen[name]} and {what})",
                hint="give every value a unique name",
            )
        seen[name] = what

    for v in graph.inputs:
        claim(v.name, f"graph input '{v.name}'")
    for c in graph.constants.values():
        claim(c.name, f"constant '{c.name}'")
    node_names: set[str] = set()
    for n in graph.nodes:
        if n.name in node_names:
            raise GraphError(f"{n.where}: node name used twice", hint="give every node a unique name")
        node_names.add(n.name)
        for v in n.outputs:
            claim(v.name, f"output of {n.where}")


def _check_order(graph: Graph) -> None:
    defined: set[int] = {id(v) for v in graph.inputs} | {id(c) for c in graph.constants.values()}
    producers: dict[int, Node] = {}
    for n in graph.nodes:
        for v in n.outputs:
            producers[id(v)] = n
    for n in graph.nodes:
        for i, inp in enumerate(n.inputs):
            if inp is None or id(inp) in defined:
                continue
            if id(inp) not in producers:
                raise GraphError(
                    f"{n.where}: input {i} '{inp.name}' is not defined in the graph",
                    hint="make it a graph input, a constant, or the output of a node",
                )
            cycle = _find_cycle(graph)
            if cycle:
                raise GraphError(
                    "the graph has a cycle through nodes " + " -> ".join(f"'{x}'" for x in cycle),
                    hint="a dataflow graph must be acyclic",
                )
            raise GraphError(
                f"{n.where}: input {i} '{inp.name}' is used before the node that defines it",
                hint="nodes must be in topological order",
            )
        for v in n.outputs:
            defined.add(id(v))
    for v in graph.outputs:
        if id(v) not in defined:
            raise GraphError(f"graph output '{v.name}' is not defined in the graph")


def _find_cycle(graph: Graph) -> list[str]:
    producers = {id(v): n for n in graph.nodes for v in n.outputs}
    state: dict[int, int] = {}
    stack: list[Node] = []

    def deps(n: Node) -> list[Node]:
        return [producers[id(v)] for v in n.inputs if v is not None and id(v) in producers]

    for start in graph.nodes:
        if state.get(id(start)):
            continue
        # iterative DFS: (node, iterator over deps)
        work = [(start, iter(deps(start)))]
        state[id(start)] = 1
        stack = [start]
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                state[id(node)] = 2
                work.pop()
                stack.pop()
                continue
            s = state.get(id(nxt), 0)
            if s == 1:
                idx = next(i for i, x in enumerate(stack) if x is nxt)
                return [x.name for x in stack[idx:]] + [nxt.name]
            if s == 0:
                state[id(nxt)] = 1
                stack.append(nxt)
                work.append((nxt, iter(deps(nxt))))
    return []


def _check_node(graph: Graph, node: Node) -> None:
    where = node.where
    try:
        opdef = graph.registry.get(node.op)
    except UnsupportedOpError as err:
        raise UnsupportedOpError(f"{where}: op '{node.op}' is not defined", hint=err.hint) from None
    opdef.check_input_count(len(node.inputs), where)
    in_kinds = [v.kind if v is not None else None for v in node.inputs]
    opdef.check_input_kinds(in_kinds, where)
    for i, v in enumerate(node.inputs):
        spec = opdef.input_spec(i)
        if v is None and not spec.optional:
            raise GraphError(f"{where}: input {i} ('{spec.name}') is required but absent")
    node.attrs = opdef.normalize_attrs(node.attrs, where)
    for key, param in opdef.params.items():
        if param.type == "graph":  # a branch or body is a graph of its own (its inputs declared)
            try:
                verify(node.attrs[key], require_static=False)
            except OpbridgeError as err:
                raise type(err)(f"{where} param '{key}' (sub-graph '{node.attrs[key].name}'): "
                                f"{err.message}", hint=err.hint) from None
    unfilled = opdef.unfilled_params(node.attrs)
    if unfilled:
        # kernels and computes read per-axis parameters as given; GraphBuilder.op fills them
        raise AttrError(
            f"{where} param '{unfilled[0]}': absent; {node.op} needs this per-axis parameter "
            "explicitly",
            hint="create nodes with GraphBuilder.op, which fills it from the inputs",
        )
    # dtypes against type params: every input bound to one type variable has one dtype
    bound: dict[str, tuple[str, str]] = {}
    for i, v in enumerate(node.inputs):
        if v is None:
            continue
        spec = opdef.input_spec(i)
        allowed = opdef.allowed_dtypes(spec.type)
        if v.dtype not in allowed:
            raise ShapeError(
                f"{where}: input {i} ('{spec.name}') '{v.name}' has dtype {v.dtype}; "
                f"{node.op} allows {', '.join(allowed)} there",
                hint="insert a Cast",
            )
        if spec.type in opdef.type_params:
            if spec.type in bound and bound[spec.type][0] != v.dtype:
                other = bound[spec.type]
                raise ShapeError(
                    f"{where}: input {i} ('{spec.name}') is {v.dtype} but '{other[1]}' is "
                    f"{other[0]}; both are type {spec.type}",
                    hint="insert a Cast so that they agree",
                )
            bound[spec.type] = (v.dtype, v.name)
    try:
        types = opdef.infer(
            node.name,
            [(v.shape, v.dtype) if v is not None else None for v in node.inputs],
            node.attrs,
            [v.data if v is not None else None for v in node.inputs],
            len(node.outputs),
        )
    except AttrError:
        raise
    if len(types) != len(node.outputs):
        raise ShapeError(
            f"{where}: has {len(node.outputs)} outputs; its shape function gives {len(types)}"
        )
    kinds = opdef.output_kinds(node.name, in_kinds, node.attrs, len(node.outputs))
    for v, kind in zip(node.outputs, kinds):
        if v.kind != kind:
            raise ShapeError(f"{where}: output '{v.name}' is declared a {v.kind}; the op gives a {kind}")
    for v, (shape, dtype) in zip(node.outputs, types):
        if tuple(v.shape) != tuple(shape) or v.dtype != dtype:
            raise ShapeError(
                f"{where}: output '{v.name}' is declared {v.dtype}{format_shape(v.shape)} but "
                f"the op gives {dtype}{format_shape(shape)}",
                hint="re-infer the shapes (rebuild the node) after changing inputs or attributes",
            )


