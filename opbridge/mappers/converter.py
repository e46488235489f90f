"""The conversion loop: OriginGraph -> verified ir.Graph, through the mapping registry.

Before anything is converted, a pre-flight looks up every node's mapping and reports every
unmapped (domain, op type, version) at once. Then each origin node is mapped in file order;
the Values a mapping returns are named after the node's output tensors, and every IR node
keeps the origin (framework, op type, node name), so tensors can be compared by the names
they have in the user's model.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import (
    AttrError,
    GraphError,
    MappingError,
    OpbridgeError,
    ShapeError,
    UnsupportedOpError,
    node_ctx,
)
from ..ir.graph import Graph, GraphBuilder, Node, Origin, Value
from ..ir.opdef import DEFAULT_OPS, OpDef, OpRegistry
from ..ir.passes.fold import can_fold, evaluate
from ..ir.types import format_shape, from_numpy_dtype, is_static
from ..parsers.origin import Framework, OriginGraph, OriginNode, TensorInfo
from .context import MapContext, error_context
from .registry import (
    DEFAULT_MAPPINGS,
    MappingEntry,
    MappingRegistry,
    normalize_domain,
    qualified_name,
    registration_line,
)


def _ir_dtype(dt: Any, what: str) -> str:
    try:
        return from_numpy_dtype(dt)
    except ShapeError:
        raise UnsupportedOpError(
            f"{what} has dtype {dt}, which the opbridge IR does not support",
            hint="the IR has f32 f16 bf16 f64, signed/unsigned ints and bool",
        ) from None


def _node_fields(node: OriginNode, opset: int, source: Any = None) -> dict[str, Any]:
    """The error fields of an origin node being mapped (the opset for ONNX nodes only)."""
    return error_context(node, source=source or None,
                         opset=opset if node.framework == Framework.ONNX else None)


class Conversion:
    """The state of one conversion: the builder, origin tensor name -> Value, names in use."""

    def __init__(self, origin: OriginGraph, registry: MappingRegistry, ops: OpRegistry,
                 constant_inputs: Mapping[str, np.ndarray], const_requests: set[str] | None) -> None:
        self.origin = origin
        self.registry = registry
        self.ops = ops
        self.builder = GraphBuilder(origin.name or "graph", registry=ops)
        self.values: dict[str, Value] = {}
        self.inputs: dict[str, Value] = {}
        self.constant_inputs = constant_inputs
        self.const_requests = const_requests
        #: graph inputs of a dtype the IR lacks (a string tensor), by name: refused where a node
        #: reads one, so that the node's mapping refuses its own case first (it can say what
        #: the model should give instead), and after mapping if nothing reads it
        self.untyped: dict[str, Any] = {}
        # every origin tensor name is reserved, so names we invent never take one of them
        self.reserved: set[str] = {t.name for t in origin.inputs} | {t.name for t in origin.outputs}
        for n in origin.nodes:
            self.reserved.update(x for x in n.inputs if x)
            self.reserved.update(x for x in n.outputs if x)
            self.reserved.update(n.weights)
        self.used: set[str] = set()
        self.node_names: set[str] = set()
        #: Name scopes of inlined bodies (ONNX functions, subgraphs), innermost last: a body's
        #: tensor name -> the name it was given in this graph.
        self.scopes: list[dict[str, str]] = []
        #: The sub-graphs being mapped as graphs of their own (run-time If/Loop bodies),
        #: innermost last; ``builder`` is the innermost one's, ``root`` the model's.
        self.root = self.builder
        self.frames: list[_Frame] = []
        #: Where the mappings running now are defined, innermost last (a body's node is mapped
        #: while its enclosing node's mapping runs): an error of what they emit names the site.
        self.mapping_sites: list[str] = []

    # -- names ------------------------------------------------------------------------------
    def fresh(self, base: str, *, nodes: bool = False) -> str:
        """An unused value (or node) name from ``base``. A value name is also refused while the
        builder holds it: a value renamed to its origin name frees its old name here, not there."""
        taken = self.node_names if nodes else self.used
        blocked = set() if nodes else self.reserved
        name, i = base, 0
        while name in taken or name in blocked or (not nodes and self.builder.unique_name(name) != name):
            i += 1
            name = f"{base}_{i}"
        taken.add(name)
        return name

    def _claim_origin(self, name: str) -> None:
        self.used.add(name)

    # -- values -----------------------------------------------------------------------------
    def tensor_array(self, name: str, node: OriginNode | None) -> np.ndarray:
        try:
            return self.origin.tensors[name]
        except KeyError:
            where = error_context(node) if node is not None else {"framework": self.origin.framework}
            raise GraphError(f"weight '{name}' is not in the model's tensors",
                             hint="give the model's weights (Caffe: --weights / weights=; ONNX: its "
                             "external data files beside the model)", **where) from None

    def value_of(self, name: str, node: OriginNode | None) -> Value:
        """The Value of origin tensor ``name`` (initializers become constants on first use)."""
        for scope in reversed(self.scopes):
            if name in scope and scope[name] in self.values:
                return self.visible(self.values[scope[name]])
        v = self.values.get(name)
        if v is not None:
            return self.visible(v)
        if name in self.untyped:
            _ir_dtype(self.untyped[name], f"input '{name}'")
        if name in self.origin.tensors:
            arr = self.origin.tensors[name]
            _ir_dtype(arr.dtype, f"tensor '{name}'")
            self._claim_origin(name)
            v = self.root.constant(name, arr)  # the model's, whichever sub-graph reads it first
            self.values[name] = v
            return self.visible(v)
        what = "" if node is not None else "graph output "
        where = error_context(node) if node is not None else {"framework": self.origin.framework}
        later = next((n for n in self.origin.nodes if name in n.outputs), None)
        if later is not None:
            cycle = _origin_cycle(self.origin.nodes)
            why = ("the nodes form a cycle: " + " -> ".join(f"'{x}'" for x in cycle) if cycle else
                   "the model's nodes are not in topological order")
            raise GraphError(
                f"{what}'{name}' is read before {_label(later)} produces it: {why}",
                hint="every node input must be produced by an earlier node: re-export the model"
                + ("" if cycle else " (or sort its nodes, as the ONNX checker requires)"), **where)
        raise GraphError(
            f"{what}'{name}' is not produced by any node, graph input or initializer",
            hint="check the model: every node input must be defined before it is used", **where,
        )

    def peek(self, name: str) -> Value | None:
        """The Value origin tensor ``name`` has so far, without capturing or creating it."""
        for scope in reversed(self.scopes):
            if name in scope and scope[name] in self.values:
                return self.values[scope[name]]
        if name in self.untyped:  # a graph input of a dtype the IR lacks, read here first
            _ir_dtype(self.untyped[name], f"input '{name}'")
        return self.values.get(name)

    def visible(self, v: Value, depth: int | None = None) -> Value:
        """``v`` as the sub-graph being mapped (``frames[depth - 1]``) sees it: itself if
        the sub-graph made it, else a copy (a constant) or a capture (a new sub-graph input
        the control-flow node passes in), made once per sub-graph."""
        depth = len(self.frames) if depth is None else depth
        if depth == 0:
            return v
        frame = self.frames[depth - 1]
        if frame.builder.owns(v):
            return v
        inner = frame.seen.get(id(v))
        if inner is None:
            if v.data is not None:
                inner = frame.builder.constant(self.fresh(f"{frame.prefix}{v.name}"), v.data)
            else:
                frame.captures.append(self.visible(v, depth - 1))
                inner = frame.builder.input(self.fresh(f"{frame.prefix}{v.name}"), v.dtype, v.shape,
                                            v.kind)
            frame.seen[id(v)] = inner
        return inner

    def map_to_graph(self, ctx: MapContext, body: OriginGraph, types: Sequence[tuple[Any, ...]],
                     prefix: str, captures: Sequence[Value] = ()) -> tuple[Graph, list[Value]]:
        """Map ``body`` into an IR graph of its own, its inputs typed ``types`` ((dtype,
        shape) or (dtype, shape, kind) each); returns it and the values of the enclosing graph it captures (its
        inputs after ``types``'s, in order: ``captures`` first, then what it reads)."""
        if len(types) != len(body.inputs):
            raise ctx.error(f"its subgraph '{body.name}' takes {len(body.inputs)} inputs, "
                            f"{len(types)} given")
        return self.build_graph(ctx, types, lambda *bound: self.map_subgraph(ctx, body, list(bound), prefix),
                                prefix, captures, [t.name for t in body.inputs])

    def build_graph(self, ctx: MapContext, types: Sequence[tuple[Any, ...]],
                    body: Callable[..., Sequence[Value]], prefix: str, captures: Sequence[Value] = (),
                    names: Sequence[str] = ()) -> tuple[Graph, list[Value]]:
        """An IR graph of its own whose inputs are typed ``types`` and whose outputs are what
        ``body(*inputs)`` returns; the ops it emits meanwhile go into that graph, and enclosing
        values they read become capture inputs (returned, in order, after the graph)."""
        sub = GraphBuilder(self.fresh(prefix.rstrip("/")), registry=self.ops)
        frame = _Frame(sub, prefix)
        bound = [sub.input(self.fresh(prefix + (names[i] if i < len(names) else f"in{i}")), *typ)
                 for i, typ in enumerate(types)]
        outer = self.builder
        self.frames.append(frame)
        self.builder = sub
        try:
            for v in captures:  # captured first, in this order (another branch's captures)
                self.visible(v)
            outs = [self.visible(v) for v in body(*bound)]
        finally:
            self.frames.pop()
            self.builder = outer
        sub.output(*outs)
        return sub.build(require_static=False), frame.captures

    def new_constant(self, node: OriginNode, arr: Any, name: str | None, dtype: str | None) -> Value:
        base = name or f"{node.name or node.op_type.lower()}/const"
        return self.builder.constant(self.fresh(base), arr, dtype)

    def note_const_request(self, v: Value) -> None:
        """Record the graph inputs ``v`` depends on (a mapping needed ``v`` as a constant)."""
        if self.const_requests is None:
            return
        seen: set[int] = set()
        stack = [v]
        while stack:
            cur = stack.pop()
            if id(cur) in seen:
                continue
            seen.add(id(cur))
            if self.inputs.get(cur.name) is cur:
                self.const_requests.add(cur.name)
            elif cur.producer is not None:
                stack.extend(x for x in cur.producer.inputs if x is not None)

    # -- emitting IR nodes ------------------------------------------------------------------
    def emit(self, ctx: MapContext, op_type: str, inputs: list[Value | None], attrs: dict[str, Any],
             num_outputs: int | None, placement: str | None = None) -> list[Value]:
        node = ctx.node
        opdef = self.ops.get(op_type)
        label = node.name or node.op_type.lower()
        base = label if ctx.emitted == 1 else f"{label}/{op_type}"
        name = self.fresh(base, nodes=True)
        # a sub-graph being built reads enclosing values through its captures
        ins = [self.visible(v) if isinstance(v, Value) and self.frames else v for v in inputs]
        while ins and ins[-1] is None:
            ins.pop()
        for i, v in enumerate(ins):
            if v is not None and not isinstance(v, Value):
                raise MappingError(f"input {i} of the {op_type} it emits is a {type(v).__name__}, "
                                   "not a Value", hint="pass g.input(i), g.constant(array) or the "
                                   "result of g.op", **ctx.error_context())
        try:
            return self._emit_checked(ctx, opdef, name, ins, attrs, num_outputs, placement)
        except OpbridgeError as err:
            # the op registry's checks name the IR node they were given (``node_ctx(name, op)``)
            err.add_context(ir_node=name, ir_op=op_type)
            raise

    def _emit_checked(self, ctx: MapContext, opdef: OpDef, name: str, ins: list[Value | None],
                      attrs: dict[str, Any], num_outputs: int | None,
                      placement: str | None) -> list[Value]:
        op_type = opdef.name
        where = node_ctx(name, op_type)
        try:
            opdef.check_input_count(len(ins), where)
        except ShapeError as err:  # how many inputs an op gets is the mapping's choice, not the model's
            site = f"at {self.mapping_sites[-1]} " if self.mapping_sites else ""
            err.hint = (f"the mapping {site}(a plugin's, if one is loaded) passes {op_type} the wrong "
                        "number of inputs: correct it; rerun with --debug for the traceback")
            raise
        norm = opdef.normalize_attrs(attrs, where)
        n_out = num_outputs if num_outputs is not None else opdef.num_outputs_for(norm)
        if n_out is None:  # the shape function decides (optional or uncounted outputs)
            n_out = len(opdef.infer(name, [(v.shape, v.dtype) if v is not None else None for v in ins],
                                    norm, [v.data if v is not None else None for v in ins], None))
        on = ctx.origin_node
        origin = Origin(str(on.framework), on.op_type, on.name)
        if can_fold(opdef, ins):
            types = opdef.infer(name, [(v.shape, v.dtype) if v is not None else None for v in ins],
                                norm, [v.data if v is not None else None for v in ins], n_out)
            results = evaluate(opdef, name, [v.data if v is not None else None for v in ins], norm,
                               types)
            if results is not None:
                return [self.builder.constant(self.fresh(f"{name}:{i}" if len(results) > 1 else name),
                                              arr) for i, arr in enumerate(results)]
        out_names = [self.fresh(f"{name}:{i}" if n_out > 1 else name) for i in range(n_out)]
        out = self.builder.op(op_type, ins, name=name, outputs=out_names, origin=origin,
                              num_outputs=n_out, placement=placement, **attrs)
        return list(out) if isinstance(out, tuple) else [out]

    # -- one origin node --------------------------------------------------------------------
    def map_node(self, node: OriginNode, entry: MappingEntry, opset: int,
                 origin_of: OriginNode | None = None) -> None:
        """Map one origin node; ``origin_of`` is the node its IR nodes name as their origin
        (the user's node when ``node`` comes from expanding it)."""
        where = _node_fields(node, opset, self.origin.source)
        try:
            if node.framework == Framework.ONNX:  # defaults from onnx.defs, unknown names refused
                from .onnx.schema_defaults import with_schema_defaults  # imports onnx: ONNX models only

                node = with_schema_defaults(node, opset)
            ctx = MapContext(self, node, opset, origin_of)
            self.mapping_sites.append(entry.defined_at)
            try:
                result = entry.fn(node, ctx)
            finally:
                self.mapping_sites.pop()
        except OpbridgeError as err:
            err.add_context(**where)  # fills only what the raiser did not know
            # a refused case may be one of several, listed in one report with a hint of its own:
            # _map_all gives one the fallback only when it is raised alone
            if err.hint is None and not isinstance(err, UnsupportedOpError) and origin_of is None:
                err.hint = node_error_hint(err, node.framework, node.op_type)
            raise
        except Exception as err:
            raise MappingError(
                f"the mapping at {entry.defined_at} failed: {type(err).__name__}: {err}",
                hint="this is a bug in that mapping function; rerun with --debug for the traceback",
                **where,
            ) from err
        outs = self._as_values(node, entry, result)
        for i, (oname, v) in enumerate(zip(node.outputs, outs)):
            if not oname or v is None:
                continue
            # a Value this mapping made (directly, or through an inlined body) takes the origin
            # name; one that already has an origin name (an input passed through) is aliased
            if v.name not in self.reserved and not (v.data is not None and v.name in self.origin.tensors):
                self.used.discard(v.name)
                v.name = oname
                self.used.add(oname)
                if i == 0 and v.producer is not None and node.name and v.producer.name != node.name \
                        and node.name not in self.node_names:
                    self.node_names.add(node.name)
                    v.producer.name = node.name
                    self._retype(v.producer)
            self.values[oname] = v

    def _retype(self, node: Node) -> None:
        """Infer a renamed node's output shapes again: a symbolic dim it makes is named after
        the node (an If output whose branches differ), so the new name gives a new symbol."""
        if all(is_static(v.shape) for v in node.outputs):
            return
        opdef = self.ops.get(node.op)
        types = opdef.infer(node.name, [(v.shape, v.dtype) if v is not None else None for v in node.inputs],
                            node.attrs, [v.data if v is not None else None for v in node.inputs],
                            len(node.outputs))
        for v, (shape, _) in zip(node.outputs, types):
            v.shape = tuple(shape)

    # -- nested graphs (If/Loop/Scan bodies, ONNX function bodies) ----------------------------
    def map_subgraph(self, ctx: MapContext, body: OriginGraph, bound: list[Value | None],
                     prefix: str | None, *, expands: bool = False) -> list[Value]:
        """Map ``body`` with its inputs bound to ``bound``; see :meth:`MapContext.map_subgraph`.
        ``expands``: the body is the node's own definition (an ONNX function body), not a graph
        of the model."""
        if len(bound) != len(body.inputs):
            raise ctx.error(f"its subgraph '{body.name}' takes {len(body.inputs)} inputs, "
                            f"{len(bound)} given")
        prefix = prefix if prefix is not None else f"{ctx.node.name or ctx.node.op_type.lower()}/"
        # the body's own names are renamed under the prefix; any other name is the enclosing
        # graph's (ONNX scoping), found through the enclosing scopes by value_of
        rename: dict[str, str] = {"": ""}
        for t, v in zip(body.inputs, bound):
            rename[t.name] = "" if v is None else self.fresh(prefix + t.name)
            if v is not None:
                self.values[rename[t.name]] = v
        for name, arr in body.tensors.items():
            rename[name] = self.fresh(prefix + name)
            self.values[rename[name]] = self.builder.constant(rename[name], arr)
        for o in dict.fromkeys(o for n in body.nodes for o in n.outputs if o):
            rename[o] = self.fresh(prefix + o)
        self.scopes.append(rename)
        try:
            for i, inner in enumerate(body.nodes):
                self._map_body_node(ctx, body, inner, prefix + (inner.name or f"{inner.op_type}_{i}"),
                                    rename, expands)
        finally:
            self.scopes.pop()
        outs = []
        for t in body.outputs:
            # an output the body does not make is an enclosing graph's (a TorchScript block
            # may return a value of the block around it)
            v = self.values.get(rename[t.name]) if t.name in rename else self.peek(t.name)
            if v is None:
                raise ctx.error(f"its subgraph '{body.name}' does not produce its output '{t.name}'")
            outs.append(v)
        return outs

    def _map_body_node(self, ctx: MapContext, body: OriginGraph, inner: OriginNode, name: str,
                       rename: dict[str, str], expands: bool) -> None:
        sub = OriginNode(
            name=name, op_type=inner.op_type, inputs=[rename.get(t, t) for t in inner.inputs],
            outputs=[rename.get(t, t) for t in inner.outputs], attrs=inner.attrs,
            framework=inner.framework, domain=normalize_domain(inner.domain),
            weights=inner.weights, location=f"subgraph '{body.name}' of {ctx.node.where}",
        )
        version = body.opsets.get(sub.domain) or self.origin.opsets.get(sub.domain)
        entry = (self.registry.find(sub.framework, sub.op_type, sub.domain, version)
                 or self.registry.fallback(sub, version))
        where = _body_label(ctx, body, expands)
        if entry is None:
            at = f" (opset {version})" if version is not None else ""
            raise ctx.unsupported(f"{where} uses {qualified_name(sub.op_type, sub.domain)}{at}, "
                                  "which has no mapping")
        try:
            self.map_node(sub, entry, version if version is not None else entry.since,
                          origin_of=ctx.origin_node)
        except OpbridgeError as err:
            if err.node != sub.name:  # raised about the enclosing node: it names it already
                raise
            # the body node is generated (named under the enclosing node): the error is the
            # enclosing node's, the one the user can find in the model. A subgraph's nodes are
            # the model's too, so what to do is said of the inner op now (the fields will name
            # the enclosing one); a function body's are not, and the enclosing node's mapping
            # (or the report of refused cases) says it of the user's op.
            if err.hint is None and not expands:
                err.hint = node_error_hint(err, sub.framework, sub.op_type)
            err.nest_in(f"in {where}", **_node_fields(ctx.node, ctx.opset))
            raise

    def _as_values(self, node: OriginNode, entry: MappingEntry, result: Any) -> list[Value | None]:
        if result is None:
            outs: list[Any] = []
        elif isinstance(result, (tuple, list)):
            outs = list(result)
        else:
            outs = [result]
        if len(outs) > len(node.outputs):
            raise MappingError(
                f"the mapping at {entry.defined_at} returned {len(outs)} values for "
                f"{len(node.outputs)} outputs",
                hint="return one Value per origin output, in order", **error_context(node),
            )
        for v in outs:
            if v is not None and not isinstance(v, Value):
                raise MappingError(
                    f"the mapping at {entry.defined_at} returned a {type(v).__name__}, not a Value",
                    hint="return the Value(s) given by g.op(...) or g.input(i)", **error_context(node),
                )
        return outs + [None] * (len(node.outputs) - len(outs))


def _body_label(ctx: MapContext, body: OriginGraph, expands: bool) -> str:
    """How an error says where a body is, after the enclosing node's name."""
    if expands:
        return f"its {'ONNX ' if ctx.framework == Framework.ONNX else ''}function body"
    return f"its subgraph '{body.name}'"


def _label(n: OriginNode) -> str:
    return f"node '{n.name}' ({n.op_type})" if n.name else f"a {n.op_type} node"


def _origin_cycle(nodes: Sequence[OriginNode]) -> list[str]:
    """The names of nodes that form a cycle through their tensors (the first one again at the
    end), or [] when there is none."""
    producer = {t: i for i, n in enumerate(nodes) for t in n.outputs if t}
    deps = [{producer[t] for t in n.inputs if t in producer} for n in nodes]
    users: dict[int, list[int]] = {}
    for i, ds in enumerate(deps):
        for d in ds:
            users.setdefault(d, []).append(i)
    waiting = [len(ds) for ds in deps]
    ready = [i for i, w in enumerate(waiting) if w == 0]
    while ready:  # Kahn: what is left after it waits on itself, so following deps loops
        for u in users.get(ready.pop(), []):
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    left = {i for i, w in enumerate(waiting) if w > 0}
    if not left:
        return []
    path, i = [], min(left)
    while i not in path:
        path.append(i)
        i = min(d for d in deps[i] if d in left)
    loop = path[path.index(i):] + [i]  # each reads the next: reversed, in the data's direction
    return [nodes[j].name or nodes[j].op_type for j in reversed(loop)]


class _Frame:
    """A sub-graph being mapped: its builder, the enclosing values it captured (in order of
    its capture inputs) and what each enclosing value became in it."""

    def __init__(self, builder: GraphBuilder, prefix: str) -> None:
        self.builder = builder
        self.prefix = prefix
        self.captures: list[Value] = []
        self.seen: dict[int, Value] = {}


def _given_shape(t: TensorInfo, given_raw: Sequence[int]) -> tuple[int, ...]:
    """``input_shapes[t.name]`` checked against the input's declared shape (of a sequence or
    optional input: the shape of its tensors)."""
    try:
        given = tuple(int(d) for d in given_raw)
    except (TypeError, ValueError):
        raise ShapeError(f"input_shapes['{t.name}'] = {given_raw!r}: not a list of ints",
                         hint=f"give one int per dim: input_shapes={{'{t.name}': (1, 3, 224, 224)}}"
                         ) from None
    if any(d < 0 for d in given):
        raise ShapeError(f"input_shapes['{t.name}'] = {given}: dims must be >= 0",
                         hint="give the size of every dim (0 only for an empty one)")
    shape = t.shape
    if shape is not None and len(shape) != len(given):
        raise ShapeError(
            f"input '{t.name}' has rank {len(shape)} ({format_shape(shape)}); "
            f"input_shapes gives {len(given)} dims {list(given)}",
            hint=f"give {len(shape)} dims for '{t.name}'",
        )
    for d_decl, d_new in zip(shape or (), given):
        if isinstance(d_decl, int) and d_decl != d_new:
            raise ShapeError(
                f"input '{t.name}' declares dim {d_decl} where input_shapes gives {d_new} "
                f"({format_shape(shape or ())} vs {list(given)})",
                hint="only symbolic dims can be fixed with input shapes",
            )
    return given


def _fix_inputs(origin: OriginGraph, input_shapes: Mapping[str, Sequence[int]] | None,
                require_static: bool) -> list[TensorInfo]:
    """The origin inputs with ``input_shapes`` applied; symbolic dims left are errors by name."""
    shapes = dict(input_shapes or {})
    names = [t.name for t in origin.inputs]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        close = difflib.get_close_matches(unknown[0], names, n=1)
        raise ShapeError(
            f"input_shapes (--input-shape) names '{unknown[0]}', which is not an input of the model",
            hint=(f"did you mean '{close[0]}'? " if close else "")
            + f"the model's inputs are: {', '.join(names) or 'none'}",
        )
    out = []
    for t in origin.inputs:
        shape = _given_shape(t, shapes[t.name]) if t.name in shapes else t.shape
        if t.kind != "tensor":  # a sequence's tensors may differ: their shape is run-time
            if t.dtype is None:
                raise ShapeError(f"input '{t.name}' has no declared element type", hint=_ELEM_HINT)
            out.append(TensorInfo(t.name, t.dtype, shape or (), t.kind))
            continue
        if shape is None:
            raise ShapeError(
                f"input '{t.name}' has no declared shape",
                hint=f"give it with --input-shape {t.name}=1,3,224,224",
            )
        if require_static and not is_static(shape):
            sym = [d for d in shape if not isinstance(d, int)]
            raise ShapeError(
                f"input '{t.name}' has symbolic dim(s) {', '.join(map(str, sym))} in "
                f"{format_shape(shape)}",
                hint=f"fix them with --input-shape {t.name}="
                + ",".join(str(d) if isinstance(d, int) else "1" for d in shape)
                + f" (input_shapes={{'{t.name}': (...)}} in Python)",
            )
        if t.dtype is None:
            raise ShapeError(f"input '{t.name}' has no declared element type", hint=_ELEM_HINT)
        out.append(TensorInfo(t.name, t.dtype, shape))
    return out


def _subgraphs(node: OriginNode) -> list[tuple[str, OriginGraph]]:
    """The graphs a node holds, each with the attribute it is in (``then_branch``;
    ``blocks[1]`` for one of a list)."""
    out = []
    for key, value in node.attrs.items():
        if isinstance(value, OriginGraph):
            out.append((key, value))
        elif isinstance(value, list):
            out += [(f"{key}[{i}]", g) for i, g in enumerate(value) if isinstance(g, OriginGraph)]
    return out


def node_opset(origin: OriginGraph, node: OriginNode) -> int | None:
    """The model's version for the node's domain (None when it declares none)."""
    return origin.opsets.get(normalize_domain(node.domain))


def scan_mappings(origin: OriginGraph, registry: MappingRegistry,
                  ops: OpRegistry) -> tuple[dict[int, MappingEntry], list[str]]:
    """Every top-level node's mapping (by index), and one report line per unmapped op type
    (and per missing IR op), subgraphs included. A node whose subgraphs hold such an op gets
    no mapping: the line names the op where it is, and mapping the node would only fail on
    it again (reported a second time, as a refused case of the enclosing node)."""
    found: dict[int, MappingEntry] = {}
    missing: dict[tuple[str, str, int | None], list[str]] = {}
    no_ir: dict[str, list[str]] = {}

    def visit(nodes: list[OriginNode], top: bool, path: str) -> bool:
        """Record what ``nodes`` (and their subgraphs) lack; whether anything was. ``path``
        says where they are ("" at the top; innermost enclosing node first)."""
        lacking = False
        for idx, node in enumerate(nodes):
            domain = normalize_domain(node.domain)
            version = node_opset(origin, node)
            entry = registry.find(node.framework, node.op_type, domain, version)
            if entry is None:
                entry = registry.fallback(node, version)
            shown = f"'{node.name or node.op_type}'" + (f" (in {path})" if path else "")
            if entry is None:
                missing.setdefault((domain, node.op_type, version), []).append(shown)
            elif entry.ir_op is not None and entry.ir_op not in ops:
                no_ir.setdefault(entry.ir_op, []).append(shown)
            inner = False
            for key, sub in _subgraphs(node):  # If/Loop/Scan bodies, TorchScript blocks
                where = f"{key} '{sub.name}' of {_label(node)}" + (f", in {path}" if path else "")
                inner |= visit(sub.nodes, False, where)
            usable = entry is not None and (entry.ir_op is None or entry.ir_op in ops)
            if top and usable and not inner:
                found[idx] = entry
            lacking |= inner or not usable
        return lacking

    visit(origin.nodes, True, "")
    fw = Framework(origin.framework)
    lines = []
    for (domain, op, version), nodes in missing.items():
        vs = registry.versions(fw, op, domain)
        at = f" (opset {version})" if version is not None and fw == Framework.ONNX else ""
        shown = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
        have = (f"registered since-versions {', '.join(map(str, vs))}, none <= {version}" if vs
                else "no mapping registered")
        near = _near_misses(registry, fw, op, domain)
        lines.append(f"  - {qualified_name(op, domain)}{at}: node(s) {shown}; {have}; "
                     + (f"{near}; " if near else "")
                     + f"to add one: {registration_line(fw, op, domain, version)}")
    for ir_op, nodes in no_ir.items():
        lines.append(f"  - IR op '{ir_op}' {_NO_IR}; "
                     f"node(s) {', '.join(nodes[:5])}; define it with "
                     f'opbridge.define_op("{ir_op}")')
    return found, lines


#: How a report line says a mapping's IR op has no definition.
_ELEM_HINT = "declare the input's element type in the model (ONNX: its value_info elem_type)"
_NO_IR = "(target of a register_custom_op mapping) is not defined"


def unsupported_report(origin: OriginGraph, type_lines: list[str],
                       cases: Sequence[OpbridgeError] = (), unchecked: int = 0) -> UnsupportedOpError:
    """One error listing every unmapped op type (``type_lines``, from :func:`scan_mappings`)
    and every node whose mapping refused its case (``cases``), one per line."""
    fw = Framework(origin.framework)
    src = f" in '{origin.source}'" if origin.source else ""
    n, m = len(type_lines), len(cases)
    parts = []
    if n:
        parts.append(f"[{fw}] {n} unsupported op type{'s' if n > 1 else ''}{src}:")
        parts += type_lines
    if m:
        head = f"{m} unsupported case{'s' if m > 1 else ''} of mapped op types"
        parts.append(f"and {head}:" if n else f"[{fw}] {head}{src}:")
        parts += [f"  - {e.message}" + (f" ({e.hint})" if e.hint else "") for e in cases]
    if unchecked:
        parts.append(f"({unchecked} node(s) that read their outputs were not checked)")
    undefined = [line.split("'")[1] for line in type_lines if _NO_IR in line]
    hint = _preflight_hint(len(undefined) < len(type_lines), undefined)
    bare = list(dict.fromkeys(e.op_type or "OP" for e in cases if not e.hint))
    if bare:  # the fallback of a refused case, said once for every case listed without a hint
        more = f" (and likewise {', '.join(bare[1:4])})" if len(bare) > 1 else ""
        hint = "; ".join(x for x in (hint, "for a case listed without a hint: "
                                     + node_error_hint(cases[0], fw, bare[0]) + more) if x)
    return UnsupportedOpError("\n".join(parts), hint=hint)


def preflight(origin: OriginGraph, registry: MappingRegistry, ops: OpRegistry) -> dict[int, MappingEntry]:
    """Find every node's mapping; report every unmapped op (and missing IR op) in one error."""
    found, lines = scan_mappings(origin, registry, ops)
    if lines:
        raise unsupported_report(origin, lines)
    return found


def node_error_hint(err: OpbridgeError, framework: Framework, op_type: str) -> str:
    """What to do about an error the mapping of an ``op_type`` node (or the IR op it emits)
    raised without a hint of its own: the node is in the model, so the model is where to look
    first."""
    fw = str(framework)
    model, kind = ("prototxt", "layer") if framework == Framework.CAFFE else ("model", "node")
    plugin = (f"opbridge plugin new {op_type} --framework {fw} --override writes a plugin "
              "that maps it your way, --plugin FILE loads it")
    if isinstance(err, UnsupportedOpError):
        return (f"opbridge does not convert this form of the op: change the {model} to a form it "
                f"does, or {plugin}")
    if isinstance(err, AttrError):
        return (f"correct this value of the {kind} in the {model} (or export the model again); if it "
                f"is right, {plugin}")
    if isinstance(err, ShapeError):
        return ("the shapes reaching this node do not fit the op: check the model's input shapes "
                "(give symbolic or wrong ones with --input-shape NAME=DIMS); a wrong input shape "
                "first shows at the first op that cannot take it")
    return (f"the {kind} is not what {fw}'s {op_type} takes here: correct the {model} or "
            f"export it again; or {plugin}")


def _map_all(conv: Conversion, origin: OriginGraph, entries: dict[int, MappingEntry],
             type_lines: list[str]) -> None:
    """Map every node; on problems, go on with the nodes that do not depend on a failed one,
    so that the error lists every unsupported node at once (a refused case of a mapped op,
    such as a layer form the mapping does not handle, with the unmapped types)."""
    cases: list[OpbridgeError] = []
    first: OpbridgeError | None = None
    failed: set[str] = set()
    unchecked = 0
    for idx, node in enumerate(origin.nodes):
        entry = entries.get(idx)
        if entry is None or any(i in failed for i in node.inputs if i):
            failed.update(o for o in node.outputs if o)
            unchecked += entry is not None
            continue
        version = node_opset(origin, node)
        try:
            conv.map_node(node, entry, version if version is not None else entry.since)
        except OpbridgeError as err:
            if not (type_lines or cases or first) and not isinstance(err, UnsupportedOpError):
                raise  # no unsupported op so far: the usual error, at once
            failed.update(o for o in node.outputs if o)
            if isinstance(err, UnsupportedOpError):
                cases.append(err)
            elif first is None:
                first = err
    if type_lines or len(cases) > 1:
        raise unsupported_report(origin, type_lines, cases, unchecked)
    if cases:
        case = cases[0]
        if case.hint is None:  # the op it names: a node of a subgraph, or the node itself
            case.hint = node_error_hint(case, Framework(origin.framework), case.op_type or "OP")
        raise case
    if first is not None:
        raise first


def _preflight_hint(mappings_missing: bool, undefined: list[str]) -> str:
    """What fixes the pre-flight's findings: a missing mapping and a missing op definition are
    different problems, and a plugin that was passed may have caused either."""
    parts = []
    if undefined:
        more = f" (and {', '.join(undefined[1:4])})" if len(undefined) > 1 else ""
        parts.append(f"the mapping is there but the IR op it emits is not defined: add "
                     f'opbridge.define_op("{undefined[0]}").input(...).output(...).shape_fn(...)'
                     f".compute(...){more} to the plugin that registers the mapping")
    if mappings_missing:
        parts.append("register mappings in a plugin file and pass it with --plugin FILE "
                     "(plugins=[...]); if you passed one, it registers none of these (check the "
                     "framework, op type and domain it registers)")
    return "; ".join(parts)


def _near_misses(registry: MappingRegistry, fw: Framework, op: str, domain: str) -> str:
    """Mappings registered for this op type under another framework, domain or spelling (a
    plugin's likely mistake), in words; "" when there are none."""
    found = []
    for e in registry.entries():
        if e.op_type.lower() != op.lower():
            continue
        if e.framework != fw:
            found.append(f"one for {e.framework} '{e.key_text}' ({e.defined_at})")
        elif e.op_type != op:
            found.append(f"one spelled '{e.key_text}' ({e.defined_at})")
        elif e.domain is not None and e.domain != normalize_domain(domain):
            found.append(f"one pinned to domain '{e.domain}' ({e.defined_at})")
    return "a mapping exists, but not for this node: " + ", ".join(found[:3]) if found else ""


def convert_origin_graph(
    origin: OriginGraph,
    *,
    registry: MappingRegistry | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    ops: OpRegistry | None = None,
    constant_inputs: Mapping[str, np.ndarray] | None = None,
    const_requests: set[str] | None = None,
) -> Graph:
    """Map ``origin`` into a verified IR graph.

    ``constant_inputs`` binds graph inputs to fixed values (they become constants);
    ``const_requests``, when given, collects the names of graph inputs that a mapping needed
    as constants (the ONNX backend binds those and converts again).
    """
    registry = registry if registry is not None else DEFAULT_MAPPINGS
    ops = ops if ops is not None else DEFAULT_OPS
    bound = dict(constant_inputs or {})
    entries, type_lines = scan_mappings(origin, registry, ops)
    conv = Conversion(origin, registry, ops, bound, const_requests)
    free = [t for t in origin.inputs if t.name not in bound]
    sub = OriginGraph(origin.name, origin.framework, inputs=free)
    try:
        fixed = _fix_inputs(sub, input_shapes, require_static=False)
    except OpbridgeError:
        if type_lines:  # the unmapped types come first, as before anything is converted
            raise unsupported_report(origin, type_lines) from None
        raise
    for t in fixed:
        conv._claim_origin(t.name)
        try:
            dtype = _ir_dtype(t.dtype, f"input '{t.name}'")
        except UnsupportedOpError:
            conv.untyped[t.name] = t.dtype
            continue
        v = conv.builder.input(t.name, dtype, t.shape, t.kind)
        conv.values[t.name] = conv.inputs[t.name] = v
    for name, arr in bound.items():
        conv._claim_origin(name)
        conv.values[name] = conv.builder.constant(name, np.asarray(arr))
    _map_all(conv, origin, entries, type_lines)
    for name, dt in conv.untyped.items():  # no mapping read it (unread, or dropped by its reader)
        _ir_dtype(dt, f"input '{name}'")
    _add_outputs(conv, origin)
    conv.builder.metadata.update(origin.metadata)
    conv.builder.metadata.setdefault("framework", str(origin.framework))
    if origin.source:
        conv.builder.metadata.setdefault("source", str(origin.source))
    # symbolic dims the caller did not fix stay symbolic (ob.compile asks for static ones)
    try:
        return conv.builder.build(require_static=False)
    except OpbridgeError as err:
        # every node mapped and checked itself: a graph that does not verify is the mappings'
        # fault, and a GraphError's own hint speaks to whoever builds a graph by hand
        if err.hint is None or isinstance(err, GraphError):
            err.hint = ("a mapping (a plugin's, if one is loaded) emitted IR that does not fit "
                        "together: rerun with --debug for the traceback, and please report it")
        raise


def _add_outputs(conv: Conversion, origin: OriginGraph) -> None:
    """The graph's outputs, one Value each. A model may return one tensor twice (TorchScript
    ``return y, y``, or ``y, y.clone()`` where the clone maps to y itself): the repeat becomes an
    Identity named after its origin output, so every output has a name of its own to be fetched,
    compared and written by."""
    taken: set[int] = set()
    for t in origin.outputs:
        v = conv.values.get(t.name)
        if v is None and t.name in origin.tensors:
            v = conv.value_of(t.name, None)  # an initializer that is also a graph output
        if v is None:
            raise GraphError(
                f"[{origin.framework}] graph output '{t.name}' is not produced by any node",
                hint="check the model's outputs",
            )
        if id(v) in taken:
            name = t.name if t.name not in conv.used else conv.fresh(t.name)
            v = conv.builder.op("Identity", [v], name=conv.fresh(name, nodes=True), outputs=[name])
        taken.add(id(v))
        conv.builder.output(v)
