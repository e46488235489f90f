"""Pattern rewrites: match a chain or small DAG of IR ops and replace it with one op.

This is the public way to fuse several ops into one (MagicMind's big-op fusion, CANN's fusion
parse functions, TPU-MLIR's rewrite patterns): a plugin describes the ops to find, with
attribute and shape predicates, and a function that builds the replacement (usually the
plugin's own op)::

    from opbridge.ir.passes import Pattern

    p = Pattern("ffn")
    x = p.any("x", rank=3)                                 # any value: an input of the match
    w1, b1 = p.constant("w1", rank=2), p.constant("b1", rank=1)
    h = p.op("Gelu", p.op("Add", p.op("MatMul", x, w1), b1), approximate="none")
    y = p.op("Add", p.op("MatMul", h, p.constant("w2")), p.constant("b2"))   # the root: last op

    def fuse(m, r):                                        # m: Match, r: Rewriter
        return r.op("FusedFFN", [m["x"], m["w1"], m["b1"], m["w2"], m["b2"]])

    ob.register_pass("fuse_ffn")(p.rewrite(fuse))

Matching starts at the pattern's root (its last op) and walks producers backwards, so a
pattern is a DAG with one output: a name used twice (``x`` feeding two branches) must bind
the same tensor both times. Commutative ops (:data:`COMMUTATIVE`) match their two inputs in
either order. A match is used only when the tensors inside it are read by nothing outside it
and are not graph outputs (fusing them would lose them). The replacement's last op takes over
the root's output tensor, its name and its origin, so validation still finds it by name; the
other matched tensors disappear. The replacement must give the root's dtype and shape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import OpbridgeError, node_ctx
from ..graph import Graph, Node, Origin, Value
from ..types import format_shape
from .base import PassResult

#: Two-input ops whose inputs a pattern matches in either order (unless ``commute=False``).
COMMUTATIVE: frozenset[str] = frozenset({"Add", "Mul", "Max", "Min", "And", "Or", "Xor", "Equal",
                                         "Sum", "Mean", "BitwiseAnd", "BitwiseOr", "BitwiseXor"})

ValuePredicate = Callable[[Value], bool]
NodePredicate = Callable[[Node], bool]
#: ``replace(match, rewriter)`` -> the Value(s) that take over the root's outputs, or None to
#: leave this match alone (a condition the pattern could not say).
ReplaceFn = Callable[["Match", "Rewriter"], Value | Sequence[Value] | None]


class PatternError(OpbridgeError, ValueError):
    """A pattern or its replacement is wrong (a typo in an attribute name, a replacement that
    changes the root's shape); the message names the pass and the matched node."""


@dataclass(eq=False)
class PValue:
    """A placeholder for one tensor in a pattern: ``any``, ``const`` or an op's output."""

    pattern: Pattern
    kind: str
    name: str
    dtype: tuple[str, ...] | None = None
    rank: int | None = None
    shape: tuple[int | None, ...] | None = None
    where: ValuePredicate | None = None
    op: POp | None = None
    index: int = 0

    def accepts(self, v: Value) -> bool:
        """Whether ``v`` satisfies this placeholder's own predicates (not its producer's)."""
        if self.kind == "const" and not v.is_constant:
            return False
        if self.dtype is not None and v.dtype not in self.dtype:
            return False
        if self.rank is not None and len(v.shape) != self.rank:
            return False
        if self.shape is not None and (len(v.shape) != len(self.shape) or any(
                want is not None and got != want for want, got in zip(self.shape, v.shape))):
            return False
        return self.where is None or bool(self.where(v))

    def __repr__(self) -> str:
        return f"PValue({self.kind} {self.name!r})"


@dataclass(eq=False)
class POp:
    """One op of a pattern: op type(s), inputs, attribute predicates, a node predicate."""

    name: str
    op_types: tuple[str, ...]
    inputs: list[PValue | None]
    attrs: dict[str, Any]
    where: NodePredicate | None
    commute: bool
    outputs: list[PValue] = field(default_factory=list)


@dataclass
class Match:
    """One place where a pattern matched: ``m["x"]`` is the tensor bound to placeholder ``x``,
    ``m.node("gelu")`` the node matched by the pattern op named ``gelu``."""

    pattern: Pattern
    values: dict[str, Value]
    nodes_by_name: dict[str, Node]
    root: Node

    def __getitem__(self, name: str) -> Value:
        try:
            return self.values[name]
        except KeyError:
            raise PatternError(f"pattern '{self.pattern.name}' has no value named '{name}'",
                               hint=f"its names: {', '.join(sorted(self.values))}") from None

    def node(self, name: str) -> Node:
        """The graph node matched by the pattern op named ``name``."""
        try:
            return self.nodes_by_name[name]
        except KeyError:
            raise PatternError(f"pattern '{self.pattern.name}' has no op named '{name}'",
                               hint=f"its ops: {', '.join(sorted(self.nodes_by_name))}") from None

    def const(self, name: str) -> np.ndarray:
        """The data of the constant bound to ``name``."""
        v = self[name]
        if v.data is None:
            raise PatternError(f"pattern '{self.pattern.name}': '{name}' is bound to "
                               f"'{v.name}', which is not a constant", hint="declare it with .constant()")
        return v.data

    @property
    def nodes(self) -> list[Node]:
        """Every matched node (the root included)."""
        return list(self.nodes_by_name.values())

    def __repr__(self) -> str:
        return f"Match({self.pattern.name!r} at {self.root.where}: {[n.name for n in self.nodes]})"


@dataclass
class _State:
    """Bindings made so far while matching (copied at each choice point: patterns are small)."""

    values: dict[int, Value] = field(default_factory=dict)  # id(PValue) -> Value
    nodes: dict[int, Node] = field(default_factory=dict)  # id(POp) -> Node
    claimed: dict[int, int] = field(default_factory=dict)  # id(Node) -> id(POp)

    def copy(self) -> _State:
        return _State(dict(self.values), dict(self.nodes), dict(self.claimed))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


class Pattern:
    """A DAG of IR ops to find; build it with :meth:`any`, :meth:`constant` and :meth:`op`."""

    def __init__(self, name: str = "pattern") -> None:
        self.name = name
        self.ops: list[POp] = []
        self.placeholders: dict[str, PValue] = {}

    def __repr__(self) -> str:
        return f"Pattern({self.name!r}: {' -> '.join('|'.join(p.op_types) for p in self.ops)})"

    # -- building -------------------------------------------------------------------------
    def _placeholder(self, kind: str, name: str, dtype: str | Sequence[str] | None, rank: int | None,
                     shape: Sequence[int | None] | None, where: ValuePredicate | None) -> PValue:
        if name in self.placeholders:
            raise PatternError(f"pattern '{self.name}': name '{name}' is used twice",
                               hint="give every placeholder and op its own name")
        dt = (dtype,) if isinstance(dtype, str) else (tuple(dtype) if dtype is not None else None)
        v = PValue(self, kind, name, dt, rank, tuple(shape) if shape is not None else None, where)
        self.placeholders[name] = v
        return v

    def any(self, name: str, *, dtype: str | Sequence[str] | None = None, rank: int | None = None,
            shape: Sequence[int | None] | None = None, where: ValuePredicate | None = None) -> PValue:
        """Any tensor (an input of the matched region): ``shape`` may hold None wildcards;
        ``where(value)`` is any further condition."""
        return self._placeholder("any", name, dtype, rank, shape, where)

    def constant(self, name: str, *, dtype: str | Sequence[str] | None = None,
                 rank: int | None = None, shape: Sequence[int | None] | None = None,
                 where: ValuePredicate | None = None) -> PValue:
        """A constant tensor (a weight); ``m.const(name)`` gives its data."""
        return self._placeholder("const", name, dtype, rank, shape, where)

    def op(self, op_type: str | Sequence[str], *inputs: PValue | None, name: str | None = None,
           where: NodePredicate | None = None, commute: bool | None = None,
           num_outputs: int = 1, dtype: str | Sequence[str] | None = None, rank: int | None = None,
           shape: Sequence[int | None] | None = None, **attrs: Any) -> Any:
        """An op of one of the types ``op_type`` whose inputs match ``inputs`` (None: an absent
        optional input). ``attrs`` must equal the node's attributes (a callable is called with
        the attribute's value instead); ``where(node)`` is any further condition; ``dtype``,
        ``rank``, ``shape`` constrain its first output. Returns its output placeholder (a tuple
        when ``num_outputs`` > 1). The last op added is the root of the pattern."""
        types = (op_type,) if isinstance(op_type, str) else tuple(op_type)
        for i, v in enumerate(inputs):
            if v is not None and (not isinstance(v, PValue) or v.pattern is not self):
                raise PatternError(f"pattern '{self.name}': input {i} of {'|'.join(types)} is "
                                   f"{type(v).__name__}, not a placeholder of this pattern")
        opname = name or f"{types[0].lower()}_{len(self.ops)}"
        if commute is None:
            commute = len(inputs) == 2 and all(t in COMMUTATIVE for t in types)
        pop = POp(opname, types, list(inputs), dict(attrs), where, commute)
        outs = []
        for k in range(num_outputs):
            vname = opname if num_outputs == 1 else f"{opname}:{k}"
            pv = self._placeholder("op", vname, dtype if k == 0 else None, rank if k == 0 else None,
                                   shape if k == 0 else None, None)
            pv.op, pv.index = pop, k
            outs.append(pv)
        pop.outputs = outs
        self.ops.append(pop)
        return outs[0] if num_outputs == 1 else tuple(outs)

    @property
    def root(self) -> POp:
        if not self.ops:
            raise PatternError(f"pattern '{self.name}' has no op", hint="add ops with .op(...)")
        return self.ops[-1]

    def rewrite(self, replace: ReplaceFn, *, name: str | None = None) -> RewritePass:
        """A graph pass that replaces every match by what ``replace(match, rewriter)`` builds."""
        self._check_connected()
        return RewritePass(self, replace, name or self.name)

    def _check_connected(self) -> None:
        seen: set[int] = set()
        todo = [self.root]
        while todo:
            pop = todo.pop()
            if id(pop) in seen:
                continue
            seen.add(id(pop))
            todo.extend(v.op for v in pop.inputs if v is not None and v.op is not None)
        loose = [p.name for p in self.ops if id(p) not in seen]
        if loose:
            raise PatternError(
                f"pattern '{self.name}': op(s) {', '.join(loose)} do not lead to the root "
                f"'{self.root.name}' (the last op added)",
                hint="a pattern has one output: every op must feed the last one")

    # -- matching -------------------------------------------------------------------------
    def match_at(self, node: Node, outputs: frozenset[int] = frozenset()) -> Match | None:
        """The match whose root is ``node``, or None. ``outputs``: ids of graph-output values
        (tensors a match may not swallow)."""
        for st in self._match_op(self.root, node, _State()):
            if self._self_contained(st, node, outputs):
                return self._to_match(st, node)
        return None

    def find(self, graph: Graph) -> list[Match]:
        """Every non-overlapping match in ``graph``, roots in graph order."""
        outputs = frozenset(id(v) for v in graph.outputs)
        graph.rebuild_uses()
        used: set[int] = set()
        found = []
        for node in graph.nodes:
            if node.op not in self.root.op_types or id(node) in used:
                continue
            m = self.match_at(node, outputs)
            if m is None or any(id(n) in used for n in m.nodes):
                continue
            used.update(id(n) for n in m.nodes)
            found.append(m)
        return found

    def _match_value(self, pv: PValue, v: Value, st: _State) -> Iterator[_State]:
        if id(pv) in st.values:
            if st.values[id(pv)] is v:
                yield st
            return
        if not pv.accepts(v):
            return
        st = st.copy()
        st.values[id(pv)] = v
        if pv.op is None:
            yield st
            return
        node = v.producer
        if node is None or pv.index >= len(node.outputs) or node.outputs[pv.index] is not v:
            return
        yield from self._match_op(pv.op, node, st)

    def _match_op(self, pop: POp, node: Node, st: _State) -> Iterator[_State]:
        if id(pop) in st.nodes:
            if st.nodes[id(pop)] is node:
                yield st
            return
        if id(node) in st.claimed or not self._node_ok(pop, node):
            return
        st = st.copy()
        st.nodes[id(pop)] = node
        st.claimed[id(node)] = id(pop)
        for pv, v in zip(pop.outputs, node.outputs):
            if id(pv) in st.values and st.values[id(pv)] is not v:
                return
            if not pv.accepts(v):
                return
            st.values[id(pv)] = v
        orders = [pop.inputs]
        if pop.commute and len(pop.inputs) == 2:
            orders.append(pop.inputs[::-1])
        for order in orders:
            yield from self._match_inputs(list(order), list(node.inputs), st)

    def _match_inputs(self, pins: list[PValue | None], vins: list[Value | None],
                      st: _State) -> Iterator[_State]:
        if not pins:
            yield st
            return
        pv, v = pins[0], vins[0]
        if pv is None or v is None:
            if pv is None and v is None:
                yield from self._match_inputs(pins[1:], vins[1:], st)
            return
        for st2 in self._match_value(pv, v, st):
            yield from self._match_inputs(pins[1:], vins[1:], st2)

    def _node_ok(self, pop: POp, node: Node) -> bool:
        if node.op not in pop.op_types:
            return False
        n_in = len(node.inputs)
        while n_in and node.inputs[n_in - 1] is None:
            n_in -= 1
        if n_in != len(pop.inputs) or len(node.outputs) < len(pop.outputs):
            return False
        for key, want in pop.attrs.items():
            if key not in node.attrs:
                raise PatternError(
                    f"pattern '{self.name}' op '{pop.name}': {node.op} has no attribute '{key}'",
                    hint=f"{node.op} has: {', '.join(sorted(node.attrs)) or 'no attributes'}")
            got = node.attrs[key]
            if not (bool(want(got)) if callable(want) else _same(got, want)):
                return False
        return pop.where is None or bool(pop.where(node))

    def _self_contained(self, st: _State, root: Node, outputs: frozenset[int]) -> bool:
        """No tensor made inside the match (other than the root's) is read outside it or is a
        graph output, and no input placeholder is bound to one (it would vanish with its node)."""
        inside = set(st.claimed)
        made: set[int] = set()
        for node in st.nodes.values():
            if node is root:
                continue
            for v in node.outputs:
                made.add(id(v))
                if id(v) in outputs or any(id(u) not in inside for u in v.users):
                    return False
        return not any(pv.op is None and id(st.values[id(pv)]) in made
                       for pv in self.placeholders.values() if id(pv) in st.values)

    def _to_match(self, st: _State, root: Node) -> Match:
        values = {pv.name: st.values[id(pv)] for pv in self.placeholders.values()
                  if id(pv) in st.values}
        nodes = {pop.name: st.nodes[id(pop)] for pop in self.ops if id(pop) in st.nodes}
        return Match(self, values, nodes, root)


class Rewriter:
    """Builds a match's replacement: :meth:`op` adds a node, :meth:`constant` a constant.

    Node and tensor names are made unique in the graph. The node whose output replaces the
    root's output takes the root's node name (unless given ``name``); every new node takes the
    root's origin, so validation reports the fused op under the origin name of the tensor it
    replaces.
    """

    def __init__(self, graph: Graph, match: Match, names: _Names, pass_name: str) -> None:
        self.graph = graph
        self.match = match
        self.pass_name = pass_name
        self.nodes: list[Node] = []
        self.constants: list[Value] = []
        self._names = names

    def constant(self, name: str, data: Any) -> Value:
        """A new constant (a precomputed weight, e.g. two matrices concatenated)."""
        from ..types import from_numpy_dtype

        arr = np.asarray(data)
        v = Value(self._names.value(f"{self.match.root.name}/{name}"), from_numpy_dtype(arr.dtype),
                  arr.shape, data=arr)
        self.constants.append(v)
        return v

    def op(self, op_type: str, inputs: Sequence[Value | None], *, name: str | None = None,
           placement: str | None = None, **attrs: Any) -> Any:
        """Add a node of ``op_type``; returns its output Value (a tuple when several)."""
        root = self.match.root
        opdef = self.graph.registry.get(op_type)
        node_name = self._names.node(name or f"{root.name}/{op_type.lower()}", exact=name is not None,
                                     free={n.name for n in self.match.nodes})
        where = node_ctx(node_name, op_type)
        ins = list(inputs)
        while ins and ins[-1] is None:
            ins.pop()
        opdef.check_input_count(len(ins), where)
        norm = opdef.normalize_attrs(attrs, where)
        types = opdef.infer(node_name, [(v.shape, v.dtype) if v is not None else None for v in ins],
                            norm, [v.data if v is not None else None for v in ins],
                            opdef.num_outputs_for(norm))
        outs = [Value(self._names.value(node_name if len(types) == 1 else f"{node_name}:{k}"), dt, shp)
                for k, (shp, dt) in enumerate(types)]
        node = Node(op_type, node_name, ins, outs, norm,
                    Origin(root.origin.framework, root.origin.op_type, root.origin.name),
                    placement if placement is not None else opdef.default_placement)
        for v in outs:
            v.producer = node
        self.nodes.append(node)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def finish(self, result: Value | Sequence[Value]) -> None:
        """Make the replacement's result take over the root's output tensors."""
        root = self.match.root
        results = [result] if isinstance(result, Value) else list(result)
        where = f"pass '{self.pass_name}': the replacement of {root.where}"
        if len(results) != len(root.outputs):
            raise PatternError(f"{where} gives {len(results)} value(s) for its "
                               f"{len(root.outputs)} output(s)")
        for new, old in zip(results, root.outputs):
            node = new.producer if isinstance(new, Value) else None
            if node is None or all(n is not node for n in self.nodes):
                raise PatternError(f"{where}: return the Value of an op made with r.op(...), "
                                   f"not {new!r}")
            if (new.dtype, tuple(new.shape)) != (old.dtype, tuple(old.shape)):
                raise PatternError(
                    f"{where}: {node.where} gives {new.dtype}{format_shape(new.shape)}, the "
                    f"matched '{old.name}' is {old.dtype}{format_shape(old.shape)}",
                    hint="the fused op must compute the same tensor as the ops it replaces")
            node.outputs[node.outputs.index(new)] = old
            old.producer = node
            self._names.values.discard(new.name)
        last = results[-1].producer
        if last is not None and last.name.startswith(f"{root.name}/") and all(
                n.name != root.name for n in self.nodes):
            self._names.nodes.discard(last.name)
            last.name = root.name
            self._names.nodes.add(root.name)


class _Names:
    """The node and tensor names in use in the graph being rewritten."""

    def __init__(self, graph: Graph) -> None:
        self.values = set(graph.values())
        self.nodes = {n.name for n in graph.nodes}

    def value(self, base: str) -> str:
        return self._unique(self.values, base)

    def node(self, base: str, *, exact: bool, free: set[str]) -> str:
        if exact:
            if base in self.nodes and base not in free:
                raise PatternError(f"node name '{base}' is already used in the graph",
                                   hint="leave name= out for a generated one")
            self.nodes.add(base)
            return base
        return self._unique(self.nodes, base)

    @staticmethod
    def _unique(taken: set[str], base: str) -> str:
        name, i = base, 0
        while name in taken:
            i += 1
            name = f"{base}_{i}"
        taken.add(name)
        return name


class RewritePass:
    """A graph pass made from a :class:`Pattern` and a replacement function."""

    def __init__(self, pattern: Pattern, replace: ReplaceFn, name: str) -> None:
        self.pattern = pattern
        self.replace = replace
        self.name = name

    def __call__(self, graph: Graph) -> PassResult:
        matches = self.pattern.find(graph)
        names = _Names(graph)
        inserted: dict[int, list[Node]] = {}  # id(root) -> replacement nodes
        dropped: set[int] = set()
        constants = dict(graph.constants)
        fused = 0
        for m in matches:
            r = Rewriter(graph, m, names, self.name)
            result = self._replace(m, r)
            if result is None:
                continue
            r.finish(result)
            inserted[id(m.root)] = r.nodes
            dropped.update(id(n) for n in m.nodes)
            constants.update((c.name, c) for c in r.constants)
            fused += 1
        if not fused:
            return PassResult(graph, False, "no match")
        nodes: list[Node] = []
        for n in graph.nodes:
            nodes.extend(inserted.get(id(n), [] if id(n) in dropped else [n]))
        # the matched ops' constants nothing reads any more go (the weights the fused op took
        # over stay); other constants are not this pass's business
        read = {id(v) for n in nodes for v in n.inputs if v is not None} | {id(v) for v in graph.outputs}
        was_read = {id(v) for m in matches for n in m.nodes if id(n) in dropped for v in n.inputs
                    if v is not None}
        kept = [c for c in constants.values() if id(c) in read or id(c) not in was_read]
        g = Graph(graph.name, graph.inputs, graph.outputs, nodes, kept, graph.registry, graph.metadata)
        g.rebuild_uses()
        made = sorted({n.op for ns in inserted.values() for n in ns})
        plural = "match" if fused == 1 else "matches"
        return PassResult(g, True, f"{fused} {plural} of {self._describe()} replaced by "
                                   f"{', '.join(made)}")

    def _replace(self, m: Match, r: Rewriter) -> Value | Sequence[Value] | None:
        try:
            return self.replace(m, r)
        except OpbridgeError as err:
            err.add_context(ir_node=m.root.name, ir_op=m.root.op)
            if not err.detail.startswith(f"pass '{self.name}'"):
                err.detail = f"pass '{self.name}' at {m.root.where}: {err.detail}"
            raise
        except Exception as err:
            raise PatternError(
                f"pass '{self.name}' at {m.root.where}: the replacement function failed: "
                f"{type(err).__name__}: {err}", hint="fix the function given to Pattern.rewrite",
                ir_node=m.root.name, ir_op=m.root.op) from err

    def _describe(self) -> str:
        return " -> ".join("|".join(p.op_types) for p in self.pattern.ops)

    def __repr__(self) -> str:
        return f"RewritePass({self.name!r}, pattern={self._describe()})"


__all__ = ["COMMUTATIVE", "Match", "POp", "PValue", "Pattern", "PatternError", "RewritePass",
           "Rewriter"]
