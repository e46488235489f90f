"""MapContext: what a mapping function sees of the conversion (the ``g`` in ``fn(node, g)``).

It gives the node's inputs as IR Values, their data where they are constant, the framework
weights, and emits IR nodes with the origin (framework, op type, node name) set automatically.
An op whose inputs are all constant is evaluated at once (its reference compute) and becomes
a constant, so shape-computing chains (Shape -> Gather -> Concat -> Reshape) reach the
mappings that need them as attributes. :meth:`MapContext.map_subgraph` maps a nested graph
(an If branch, a Loop body, an expanded function) through the same registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import AttrError, MappingError, OpbridgeError, ShapeError, UnsupportedOpError
from ..ir.graph import Graph, Value
from ..ir.types import is_static, to_numpy_dtype
from ..parsers.origin import Framework, OriginGraph, OriginNode
from .weights import check_kind, current_provider, fit_weight, make_request, missing_weight

if TYPE_CHECKING:
    from .converter import Conversion


def error_context(node: OriginNode, **more: Any) -> dict[str, Any]:
    """The error context fields of an origin node: ``SomeError(msg, **error_context(node))``."""
    kind = "layer" if node.framework == Framework.CAFFE else "node"
    return {"framework": str(node.framework), "node": node.name, "op_type": node.op_type,
            "kind": kind, **more}


class MapContext:
    """The conversion as one mapping sees it; built by the converter for each origin node."""

    def __init__(self, conv: Conversion, node: OriginNode, opset: int,
                 origin_of: OriginNode | None = None) -> None:
        self._conv = conv
        self.node = node
        self.opset = opset
        #: The node the emitted IR nodes name as their origin (differs from ``node`` inside an
        #: expanded ONNX function body: the user's node, not the body's).
        self.origin_node = origin_of if origin_of is not None else node
        #: Values created while mapping this node (the converter names them after the origin).
        self.created: set[int] = set()
        #: How many IR ops this mapping has emitted (the first is named after the node).
        self.emitted = 0
        #: Weights the provider gave this node: index -> (array, its Value once made).
        self._provided: dict[int, tuple[np.ndarray, Value | None]] = {}

    @property
    def framework(self) -> Framework:
        return self.node.framework

    @property
    def origin_graph(self) -> OriginGraph:
        """The whole origin graph, for the few layers whose meaning depends on the net around
        them (the FCN-era Caffe Crop aligns its bottoms through the layers that made them)."""
        return self._conv.origin

    # -- inputs -----------------------------------------------------------------------------
    @property
    def num_inputs(self) -> int:
        return len(self.node.inputs)

    def has_input(self, i: int) -> bool:
        return 0 <= i < len(self.node.inputs) and bool(self.node.inputs[i])

    def input(self, i: int) -> Value | None:
        """The Value of the node's i-th input; None when absent (optional, or past the end)."""
        if not self.has_input(i):
            return None
        return self._conv.value_of(self.node.inputs[i], self.node)

    def inputs(self) -> list[Value | None]:
        return [self.input(i) for i in range(self.num_inputs)]

    def const(self, i: int) -> np.ndarray | None:
        """The data of input i if it is a constant (initializer, Constant node, folded), else None."""
        v = self.input(i)
        if v is None:
            return None
        if v.data is None:
            self._conv.note_const_request(v)
        return v.data

    def require_const(self, i: int, what: str) -> np.ndarray:
        """The data of input i, which must be constant; ``what`` names it in the error."""
        data = self.const(i)
        if data is None:
            if not self.has_input(i):
                raise AttrError(f"input {i} ({what}): required but absent", **self.error_context())
            raise UnsupportedOpError(
                f"input {i} ({what}) '{self.node.inputs[i]}' is computed at run time; "
                "opbridge needs it constant (static graphs)",
                hint="fix the graph inputs' shapes with --input-shape, or make it an initializer",
                **self.error_context(),
            )
        return data

    # -- framework weights (Caffe blobs and the like) ----------------------------------------
    @property
    def num_weights(self) -> int:
        """How many framework weights the model has for this node."""
        return len(self.node.weights)

    def has_weight(self, i: int) -> bool:
        """Whether weight i can be had: the model has it, or a weight provider gives it."""
        return 0 <= i < len(self.node.weights) or (i >= 0 and current_provider() is not None)

    def weight_array(self, i: int, shape: Sequence[int] | None = None, *, kind: str = "bias",
                     fan_in: int | None = None) -> np.ndarray:
        """The i-th framework weight (a Caffe blob) as an array.

        ``shape`` is the shape the mapping expects: a weight of another shape is a ShapeError
        naming the node (a legacy Caffe 4-D blob whose dims match once its leading ones are
        dropped is reshaped, as Caffe does). A weight the model lacks comes from the weight
        provider of the conversion (``opbridge random-weights``), which ``kind`` (one of
        ``opbridge.mappers.weights.WEIGHT_KINDS``) and ``fan_in`` tell what values suit.
        """
        where = self.error_context()
        check_kind(kind, where)
        exp = None if shape is None else tuple(int(d) for d in shape)
        if 0 <= i < len(self.node.weights):
            arr = self._conv.tensor_array(self.node.weights[i], self.node)
            return arr if exp is None else fit_weight(self.node, i, arr, exp, where)
        if i in self._provided:
            return self._provided[i][0]
        provider = current_provider()
        if provider is None or exp is None or i < 0:
            raise missing_weight(self.node, i, exp, where, "weights" in self._conv.origin.metadata)
        arr = np.asarray(provider(make_request(self.node, i, exp, kind, fan_in)))
        if arr.shape != exp:
            raise MappingError(f"the weight provider gave weight {i} shape {tuple(arr.shape)}, "
                               f"the mapping asked for {exp}", **where)
        self._provided[i] = (arr, None)
        return arr

    def weight(self, i: int, shape: Sequence[int] | None = None, *, kind: str = "bias",
               fan_in: int | None = None) -> Value:
        """The i-th framework weight as a constant Value (created once, named after the
        weight); ``shape``, ``kind`` and ``fan_in`` as for :meth:`weight_array`."""
        arr = self.weight_array(i, shape, kind=kind, fan_in=fan_in)
        if 0 <= i < len(self.node.weights):
            name = self.node.weights[i]
            if arr.shape == self._conv.tensor_array(name, self.node).shape:
                return self._conv.value_of(name, self.node)
            return self.constant(arr)
        provided, value = self._provided[i]
        if value is None:
            value = self.constant(provided, name=f"{self.node.name}/blob{i}")
            self._provided[i] = (provided, value)
        return value

    # -- emitting ---------------------------------------------------------------------------
    def op(self, op_type: str, inputs: Sequence[Value | None], *, num_outputs: int | None = None,
           placement: str | None = None, **attrs: Any) -> Any:
        """Emit IR op ``op_type``; returns its Value, or a tuple of Values when it has several.
        ``placement="cpu"`` runs this node on the host (default: its op definition's placement)."""
        self.emitted += 1
        outs = self._conv.emit(self, op_type, list(inputs), attrs, num_outputs, placement)
        self.created.update(id(v) for v in outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def constant(self, array: Any, name: str | None = None, dtype: str | None = None) -> Value:
        """A constant Value holding ``array`` (named after the node unless ``name`` is given)."""
        v = self._conv.new_constant(self.node, np.asarray(array) if dtype is None else array,
                                    name, dtype)
        self.created.add(id(v))
        return v

    # -- nested graphs ----------------------------------------------------------------------
    def map_subgraph(self, body: OriginGraph, inputs: Sequence[Value | None], *,
                     prefix: str | None = None, expands: bool = False) -> list[Value]:
        """Map ``body`` as part of this node; returns the Values of its outputs, in order.

        ``body`` is a graph-valued attribute (``node.get_attr("then_branch")``) or any
        OriginGraph a mapping builds (an expanded function body). Its inputs are bound, in
        order, to ``inputs`` (None for an absent one); names it does not define come from the
        enclosing graph, as ONNX scoping says. Each body node is mapped through the registry
        at the version ``body.opsets`` (else the model) gives its domain; its tensors and nodes
        are named under ``prefix`` (default: ``"<this node's name>/"``; a name already taken
        gets a suffix), and every IR node it emits names this node as its origin. Call it
        several times to unroll a loop (a distinct prefix per call keeps names readable).

        An error at one of the body's nodes is this node's: its message names this node, then
        where the body is (``node 'flex' (FlexAttention), in its ONNX function body: node
        'flex/MatMul_3' (MatMul): ...``), and its fields ``node``/``op_type`` are this node's.
        ``expands=True`` says the body is this node's own definition (an ONNX function body)
        rather than a graph of the model.
        """
        return self._conv.map_subgraph(self, body, list(inputs), prefix, expands=expands)

    def map_to_graph(self, body: OriginGraph, types: Sequence[tuple[Any, ...]], *,
                     prefix: str | None = None, captures: Sequence[Value] = ()) -> tuple[Graph, list[Value]]:
        """Map ``body`` into an IR graph of its own (a run-time branch or loop body, held as a
        ``graph`` parameter); its inputs are typed ``types`` ((dtype, shape) or (dtype, shape, kind) each). Values it
        reads from the enclosing graph become extra inputs after those: returns the graph and
        the enclosing Values to pass for them (the node's captures), in order; ``captures``
        are taken first whether read or not (so two branches can take the same inputs)."""
        prefix = prefix if prefix is not None else f"{self.node.name or self.node.op_type.lower()}/"
        return self._conv.map_to_graph(self, body, types, prefix, captures)

    def build_graph(self, types: Sequence[tuple[Any, ...]], body: Callable[..., Sequence[Value]], *,
                    prefix: str | None = None) -> tuple[Graph, list[Value]]:
        """An IR graph of its own (a loop body this mapping writes with IR ops rather than
        maps from the model): its inputs are typed ``types`` ((dtype, shape) each) and it
        returns what ``body(*inputs)`` returns; the ``g.op``/``g.constant`` calls ``body``
        makes go into it. Values of the enclosing graph it reads become extra inputs: returns
        the graph and the enclosing Values to pass for them, as :meth:`map_to_graph` does."""
        prefix = prefix if prefix is not None else f"{self.node.name or self.node.op_type.lower()}/"
        return self._conv.build_graph(self, types, body, prefix)

    def static_dim(self, v: Value, axis: int, what: str = "this mapping") -> int:
        """Dim ``axis`` of ``v`` as an int; a symbolic one is an error naming the node that says
        how to fix it (for mappings that unroll along a dim or build constants of its size)."""
        d = v.shape[axis]
        if not isinstance(d, int):
            raise ShapeError(f"{what} needs dim {axis} of '{v.name}' {list(v.shape)} static; it is "
                             f"symbolic ({d!r})", hint="fix the input dims with --input-shape "
                             "(input_shapes= in Python)", **self.error_context())
        return d

    def full_like(self, v: Value, fill: Any, dtype: str | None = None) -> Value:
        """A tensor of ``v``'s shape filled with ``fill`` (of ``dtype``, default ``v``'s): a
        constant when the shape is static, else made at run time from ``Shape(v)`` with
        ``v``'s symbolic dims declared, so that mappings need not read dims as ints."""
        dtype = dtype or v.dtype
        arr = np.asarray(fill, dtype=to_numpy_dtype(dtype))
        if is_static(v.shape):
            return self.constant(np.full(tuple(int(d) for d in v.shape), arr), dtype=dtype)
        return self.op("DynamicConstantOfShape", [self.op("Shape", [v])], value=arr.reshape(1),
                       hint=tuple(str(d) for d in v.shape))

    def peek(self, name: str) -> Value | None:
        """The Value that tensor ``name`` of the enclosing graphs has so far (None if none yet),
        without making it visible to a sub-graph being mapped."""
        return self._conv.peek(name)

    # -- errors -----------------------------------------------------------------------------
    def error_context(self, **more: Any) -> dict[str, Any]:
        """This node's error context (framework, node, op type and ``more``), for an error of
        your own: ``raise MyError(message, **g.error_context(attribute="axis"))``."""
        return error_context(self.node, **more)

    def error(self, message: str, attr: str | None = None, hint: str | None = None) -> OpbridgeError:
        """An error naming framework, node and op (and the attribute); ``raise g.error(...)``."""
        if attr is not None:
            return AttrError(message, hint=hint, **self.error_context(attribute=attr))
        return MappingError(message, hint=hint, **self.error_context())

    def unsupported(self, message: str, hint: str | None = None) -> UnsupportedOpError:
        """An error for a case of the op that opbridge does not support (raise it)."""
        return UnsupportedOpError(message, hint=hint, **self.error_context())
