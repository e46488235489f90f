"""The IR's data structures: Value, Node, Graph, and the GraphBuilder that makes them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GraphError, ShapeError, node_ctx
from .opdef import DEFAULT_OPS, OpRegistry, check_placement
from .quantparams import QuantParams
from .types import Shape, check_shape, from_numpy_dtype, is_dtype, to_numpy_dtype


@dataclass(frozen=True)
class Origin:
    """Where a node came from: framework, the op type there, and the node's name there."""

    framework: str
    op_type: str
    name: str


#: What a value holds: a tensor, a sequence of tensors (ONNX sequences), or an optional
#: (a tensor or a sequence, or nothing). For a sequence or an optional, ``dtype`` and
#: ``shape`` are those of its tensors (the shape as far as it is known: a sequence's tensors
#: may differ), and at run time it is a list of arrays, or None for an empty optional.
KINDS = ("tensor", "sequence", "optional", "optional_sequence")


class Value:
    """A named tensor: dtype, shape, the node that produces it, the nodes that use it.

    A constant has ``data`` (a numpy array) and no producer. ``quant`` (a QuantParams) gives
    an integer value's real-number meaning where it has one. ``kind`` (one of :data:`KINDS`)
    says whether it is a tensor, a sequence or an optional.
    """

    __slots__ = ("name", "dtype", "shape", "producer", "users", "data", "quant", "kind")

    def __init__(
        self,
        name: str,
        dtype: str,
        shape: Shape,
        producer: Node | None = None,
        data: np.ndarray | None = None,
        quant: QuantParams | None = None,
        kind: str = "tensor",
    ) -> None:
        self.name = name
        self.dtype = dtype
        self.shape = tuple(shape)
        self.producer = producer
        self.users: list[Node] = []
        self.data = data
        self.quant = quant
        if kind not in KINDS:
            raise GraphError(f"value '{name}': kind {kind!r} is not one of {', '.join(KINDS)}")
        self.kind = kind

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        what = "const " if self.is_constant else "" if self.kind == "tensor" else f"{self.kind} "
        return f"Value({what}{self.name!r}, {self.dtype}, {list(self.shape)})"


class Node:
    """One op application: op type, inputs (None for an absent optional input), outputs,
    attributes, and its placement: ``"tpu"``, or ``"cpu"`` for a node that runs on the host.
    The placement is the one record of where the node runs: the simulator reads it, and the
    ``.obir`` file keeps it."""

    __slots__ = ("op", "name", "inputs", "outputs", "attrs", "origin", "placement")

    def __init__(
        self,
        op: str,
        name: str,
        inputs: Sequence[Value | None],
        outputs: Sequence[Value],
        attrs: dict[str, Any],
        origin: Origin,
        placement: str = "tpu",
    ) -> None:
        self.op = op
        self.name = name
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.attrs = dict(attrs)
        self.origin = origin
        self.placement = check_placement(placement, node_ctx(name, op), GraphError)

    @property
    def where(self) -> str:
        return node_ctx(self.name, self.op)

    def __repr__(self) -> str:
        ins = ", ".join(v.name if v is not None else "None" for v in self.inputs)
        outs = ", ".join(v.name for v in self.outputs)
        return f"Node({self.name!r}: {self.op}({ins}) -> {outs})"


class Graph:
    """A verified-or-verifiable dataflow graph; ``nodes`` are in topological order."""

    def __init__(
        self,
        name: str,
        inputs: Sequence[Value],
        outputs: Sequence[Value],
        nodes: Sequence[Node],
        constants: Iterable[Value] = (),
        registry: OpRegistry | None = None,
        metadata: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.nodes = list(nodes)
        self.constants = {c.name: c for c in constants}
        self.registry = registry if registry is not None else DEFAULT_OPS
        self.metadata = dict(metadata or {})

    def values(self) -> dict[str, Value]:
        """Every value by name: inputs, constants, node outputs."""
        out: dict[str, Value] = {}
        for v in self.inputs:
            out[v.name] = v
        out.update(self.constants)
        for n in self.nodes:
            for v in n.outputs:
                out[v.name] = v
        return out

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise GraphError(f"graph '{self.name}' has no node named '{name}'",
                         hint="'opbridge show' (or [n.name for n in graph.nodes]) lists them")

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return counts

    def rebuild_uses(self) -> None:
        """Recompute every value's producer and users from the node list."""
        for v in self.values().values():
            v.users = []
        for c in self.constants.values():
            c.producer = None
        for n in self.nodes:
            for out in n.outputs:
                out.producer = n
            for inp in n.inputs:
                if inp is not None:
                    inp.users.append(n)

    def verify(self, *, require_static: bool = True) -> Graph:
        """Check the graph (see :func:`opbridge.ir.verify.verify`); returns self."""
        from .verify import verify

        verify(self, require_static=require_static)
        return self

    def __repr__(self) -> str:
        return (
            f"Graph({self.name!r}, {len(self.inputs)} inputs, {len(self.nodes)} nodes, "
            f"{len(self.outputs)} outputs)"
        )


class GraphBuilder:
    """Builds a Graph one op at a time, inferring each output's shape and dtype as it goes.

    ``op()`` checks attributes against the op's definition (defaults filled, so every
    attribute is explicit) and raises an OpbridgeError naming the node on any problem. Each
    node's placement is the ``placement`` given to ``op()``, else its op definition's.
    """

    def __init__(self, name: str = "graph", *, registry: OpRegistry | None = None) -> None:
        self.name = name
        self.registry = registry if registry is not None else DEFAULT_OPS
        self._inputs: list[Value] = []
        self._outputs: list[Value] = []
        self._nodes: list[Node] = []
        self._constants: dict[str, Value] = {}
        self._names: set[str] = set()
        self._node_names: set[str] = set()
        self._counter = 0
        self.metadata: dict[str, str] = {}

    # -- names --------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        """``base`` if unused, else ``base_1``, ``base_2``, ..."""
        if base not in self._names:
            return base
        i = 1
        while f"{base}_{i}" in self._names:
            i += 1
        return f"{base}_{i}"

    def _claim(self, name: str) -> str:
        if not isinstance(name, str) or not name:
            raise GraphError(f"graph '{self.name}': value name {name!r} must be a non-empty string")
        if name in self._names:
            raise GraphError(
                f"graph '{self.name}': value name '{name}' is used twice",
                hint="give every value a unique name",
            )
        self._names.add(name)
        return name

    # -- graph inputs and constants -----------------------------------------------------
    def input(self, name: str, dtype: str, shape: Sequence[Any], kind: str = "tensor") -> Value:
        if not is_dtype(dtype):
            to_numpy_dtype(dtype)  # raises the standard unknown-dtype error
        v = Value(self._claim(name), dtype, check_shape(shape, f"input '{name}'"), kind=kind)
        self._inputs.append(v)
        return v

    def constant(self, name: str, data: Any, dtype: str | None = None) -> Value:
        arr = np.asarray(data) if dtype is None else np.asarray(data, dtype=to_numpy_dtype(dtype))
        if arr.dtype == np.float64 and dtype is None and not isinstance(data, np.ndarray):
            arr = arr.astype(np.float32)  # Python floats become f32 unless asked otherwise
        dt = from_numpy_dtype(arr.dtype)
        v = Value(self._claim(self.unique_name(name) if name in self._names else name), dt,
                  check_shape(arr.shape, f"constant '{name}'"), data=arr)
        self._constants[v.name] = v
        return v

    def owns(self, v: Value) -> bool:
        """Whether ``v`` was made by this builder: one of its inputs, constants or node outputs
        (a value of an enclosing graph's builder is not)."""
        if v.producer is not None:
            return any(n is v.producer for n in self._nodes)
        return any(x is v for x in self._inputs) or self._constants.get(v.name) is v

    # -- ops ----------------------------------------------------------------------------
    def op(
        self,
        op_type: str,
        inputs: Sequence[Value | None],
        *,
        name: str | None = None,
        outputs: Sequence[str] | None = None,
        origin: Origin | None = None,
        num_outputs: int | None = None,
        placement: str | None = None,
        **attrs: Any,
    ) -> Any:
        """Add a node; returns its output Value, or a tuple of Values when it has several.

        ``placement`` ("tpu" or "cpu") overrides where the op definition says the node runs."""
        opdef = self.registry.get(op_type)
        if name is None:
            self._counter += 1
            name = f"{op_type.lower()}_{self._counter}"
            while name in self._node_names:
                self._counter += 1
                name = f"{op_type.lower()}_{self._counter}"
        elif name in self._node_names:
            raise GraphError(f"{node_ctx(name, op_type)}: node name used twice",
                             hint="give each node its own name, or leave name= out for a fresh one")
        where = node_ctx(name, op_type)
        if placement is not None:  # refused before the node's names are claimed
            placement = check_placement(placement, where, GraphError)
        ins = list(inputs)
        while ins and ins[-1] is None:
            ins.pop()  # trailing absent optional inputs
        for i, v in enumerate(ins):
            if v is not None and not isinstance(v, Value):
                raise GraphError(f"{where}: input {i} is {type(v).__name__}, not a Value",
                                 hint="pass the ob.Value that input(), constant() or op() returned "
                                 "(None for an absent optional input)")
        opdef.check_input_count(len(ins), where)
        opdef.check_input_kinds([v.kind if v is not None else None for v in ins], where)
        norm = opdef.normalize_attrs(attrs, where)
        n_out = num_outputs if num_outputs is not None else opdef.num_outputs_for(norm)
        if n_out is None and outputs is not None:
            n_out = len(outputs)
        types = opdef.infer(
            name,
            [(v.shape, v.dtype) if v is not None else None for v in ins],
            norm,
            [v.data if v is not None else None for v in ins],
            n_out,
        )
        if outputs is not None and len(outputs) != len(types):
            raise ShapeError(f"{where}: {len(outputs)} output names given for {len(types)} outputs",
                             hint=f"give {len(types)} names in outputs=, or leave it out")
        kinds = opdef.output_kinds(name, [v.kind if v is not None else None for v in ins], norm,
                                   len(types))
        self._node_names.add(name)
        out_values = []
        for i, (shape, dtype) in enumerate(types):
            if outputs is not None:
                vname = self._claim(outputs[i])
            else:
                base = name if len(types) == 1 else f"{name}:{i}"
                vname = self._claim(self.unique_name(base))
            out_values.append(Value(vname, dtype, shape, kind=kinds[i]))
        node = Node(op_type, name, ins, out_values, norm,
                    origin or Origin("opbridge", op_type, name),
                    placement if placement is not None else opdef.default_placement)
        for v in out_values:
            v.producer = node
        for v in ins:
            if v is not None:
                v.users.append(node)
        self._nodes.append(node)
        return out_values[0] if len(out_values) == 1 else tuple(out_values)

    def output(self, *values: Value | Sequence[Value]) -> None:
        for v in values:
            if isinstance(v, Value):
                self._outputs.append(v)
            else:
                self._outputs.extend(v)

    @property
    def nodes(self) -> list[Node]:
        return self._nodes

    def build(self, *, verify: bool = True, require_static: bool = True) -> Graph:
        g = Graph(self.name, self._inputs, self._outputs, self._nodes,
                  self._constants.values(), self.registry, self.metadata)
        if verify:
            g.verify(require_static=require_static)
        return g
