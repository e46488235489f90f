"""ONNX ops defined by a function body in ``onnx.defs`` (Shrink, RMSNormalization, NLL loss ...).

When an op has no mapping but its ONNX schema defines it as a function of other ops (static
or context-dependent), the node is expanded into that body, read as an OriginGraph, and mapped
with ``g.map_subgraph`` like any nested graph. An explicit mapping always wins: this is the
registry's fallback. Graph-valued attributes go back to onnx.defs as the GraphProtos the
parser kept (a context-dependent body may inline them: FlexAttention's score_mod/prob_mod).
The op's own type and shape inference runs on the node first: a body checks only what its
ops check.

The IR nodes that come out keep the origin of the user's node (its op type and name), and
the node's output tensors keep their names, so validation can still match them.
Spec: https://onnx.ai/onnx/repo-docs/Functions.html
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import onnx
import onnx.defs
from onnx import helper, numpy_helper

from ...ir.types import to_numpy_dtype
from ...parsers.onnx import attribute_value
from ...parsers.origin import Framework, OriginGraph, OriginNode, TensorInfo
from ..context import MapContext
from ..registry import DEFAULT_MAPPINGS, MapFn, MappingRegistry, normalize_domain


def _schema(node: OriginNode, version: int | None) -> Any:
    return _schema_at(node.op_type, version if version is not None else onnx.defs.onnx_opset_version(),
                      node.domain or "")


@cache
def _schema_at(op_type: str, version: int, domain: str) -> Any:
    """onnx.defs' schema (cached: asked for every function-expanded node, loop iterations too)."""
    try:
        return onnx.defs.get_schema(op_type, version, domain)
    except (onnx.defs.SchemaError, TypeError, OverflowError):  # TypeError: past the C int range
        return None


#: The hint of a node the op's ONNX schema refuses.
SPEC_HINT = ("make the node's inputs and attributes what the ONNX spec of {op} asks for "
             "(its type constraints and shapes: https://onnx.ai/onnx/operators/)")


def _pick(versions: list[int], opset: int) -> int | None:
    usable = [v for v in versions if v <= opset]
    return max(usable) if usable else None


def _graph_proto(name: str, value: OriginGraph) -> onnx.GraphProto:
    """The GraphProto a graph-valued attribute was parsed from (the parser keeps it): onnx.defs
    builds bodies that inline such graphs itself (FlexAttention's score_mod and prob_mod)."""
    if not isinstance(value.proto, onnx.GraphProto):
        raise ValueError(f"graph-valued attribute '{name}' was not read from an ONNX GraphProto")
    return value.proto


def _to_attribute(name: str, value: Any) -> onnx.AttributeProto | None:
    if isinstance(value, OriginGraph):
        return helper.make_attribute(name, _graph_proto(name, value))
    if isinstance(value, list) and value and all(isinstance(v, OriginGraph) for v in value):
        return helper.make_attribute(name, [_graph_proto(name, v) for v in value])
    if isinstance(value, np.ndarray):
        return helper.make_attribute(name, numpy_helper.from_array(value))
    if isinstance(value, (list, tuple)) and not value:
        return None  # an empty list has no type; the schema's default applies
    return helper.make_attribute(name, value)


def _node_proto(node: OriginNode) -> onnx.NodeProto:
    n = helper.make_node(node.op_type, node.inputs, node.outputs, name=node.name, domain=node.domain)
    for k, v in node.attrs.items():
        a = _to_attribute(k, v)
        if a is not None:
            n.attribute.append(a)
    return n


def _input_types(g: MapContext) -> list[onnx.TypeProto | None]:
    """The node's inputs as onnx TypeProtos (None for an absent one)."""
    types: list[onnx.TypeProto | None] = []
    for v in g.inputs():
        if v is None:
            types.append(None)
            continue
        elem = helper.np_dtype_to_tensor_dtype(to_numpy_dtype(v.dtype))
        types.append(helper.make_tensor_type_proto(elem, list(v.shape)))
    return types


def check_with_schema(node: OriginNode, g: MapContext) -> None:
    """Refuse a node the op's own ONNX type and shape inference refuses (onnx.defs' schema).

    A function body checks only what its ops check: FlexAttention's body broadcasts a V of
    one head to K's head count, where the spec's inference says K and V must share it.
    Inputs that are not plain tensors are left to the body."""
    schema = _schema(node, g.opset)
    if schema is None or not schema.has_type_and_shape_inference_function:
        return
    if any(v is not None and v.kind != "tensor" for v in g.inputs()):
        return
    try:
        types = {name: t for name, t in zip(node.inputs, _input_types(g)) if t is not None}
        proto = _node_proto(node)
    except (KeyError, ValueError, TypeError):  # a type onnx cannot express: nothing to check
        return
    opsets = [helper.make_opsetid(d, v) for d, v in {**g.origin_graph.opsets, node.domain: g.opset}.items()]
    try:
        onnx.shape_inference.infer_node_outputs(schema, proto, types, opset_imports=opsets)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as err:  # a type outside the spec's
        detail = str(err).strip().rpartition("Error] ")[2]
        raise g.error(f"the ONNX spec of {node.op_type} refuses it: {detail}",
                      hint=SPEC_HINT.format(op=node.op_type)) from None


def _function_body(node: OriginNode, g: MapContext) -> onnx.FunctionProto:
    schema = _schema(node, g.opset)
    if schema is None:
        raise g.unsupported("no ONNX schema defines this op")
    if schema.has_function:
        ver = _pick(list(schema.function_opset_versions), g.opset)
        if ver is not None:
            f = onnx.FunctionProto()
            f.ParseFromString(schema.get_function_with_opset_version(ver))
            return f
    if schema.has_context_dependent_function:
        ver = _pick(list(schema.context_dependent_function_opset_versions), g.opset)
        if ver is not None:
            types = [onnx.TypeProto() if t is None else t for t in _input_types(g)]
            try:
                body = schema.get_context_dependent_function_with_opset_version(
                    ver, _node_proto(node).SerializeToString(), [t.SerializeToString() for t in types])
            except Exception as err:  # onnx raises its own error types for bad contexts
                raise g.unsupported(f"the ONNX function body cannot be built: {err}",
                                    hint=SPEC_HINT.format(op=node.op_type)) from None
            f = onnx.FunctionProto()
            f.ParseFromString(body)
            if len(f.node):
                return f
    raise g.unsupported("no mapping, and the ONNX schema has no function body for this opset")


def _attr_defaults(f: onnx.FunctionProto, schema: Any) -> dict[str, Any]:
    """Defaults of the op's attributes: the function's own, else the schema's."""
    out: dict[str, Any] = {}
    if schema is not None:
        for name, spec in schema.attributes.items():
            dv = spec.default_value
            if dv is not None and dv.type != onnx.AttributeProto.UNDEFINED:
                out[name] = attribute_value(dv)
    out.update({a.name: attribute_value(a) for a in f.attribute_proto})
    return out


def _inner_attrs(inner: onnx.NodeProto, node: OriginNode, defaults: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in inner.attribute:
        if a.ref_attr_name:
            if a.ref_attr_name in node.attrs:
                out[a.name] = node.attrs[a.ref_attr_name]
            elif a.ref_attr_name in defaults:
                out[a.name] = defaults[a.ref_attr_name]
            continue
        out[a.name] = attribute_value(a)
    return out


def function_graph(node: OriginNode, g: MapContext) -> OriginGraph:
    """The node's ONNX function body as an OriginGraph, its attribute references resolved."""
    f = _function_body(node, g)
    defaults = _attr_defaults(f, _schema(node, g.opset))
    nodes = [
        OriginNode(name="", op_type=inner.op_type, inputs=list(inner.input), outputs=list(inner.output),
                   attrs=_inner_attrs(inner, node, defaults), framework=Framework.ONNX,
                   domain=normalize_domain(inner.domain))
        for inner in f.node
    ]
    return OriginGraph(
        name=f"{f.name} function body", framework=Framework.ONNX, nodes=nodes,
        inputs=[TensorInfo(t) for t in f.input], outputs=[TensorInfo(t) for t in f.output],
        opsets={normalize_domain(o.domain): int(o.version) for o in f.opset_import},
    )


def expand_function(node: OriginNode, g: MapContext) -> Any:
    """Map ``node`` by expanding its ONNX function body and mapping each body node."""
    check_with_schema(node, g)
    body = function_graph(node, g)
    bound = [g.input(i) for i in range(len(body.inputs))]
    # a body need not compute the optional outputs the node does not ask for
    wanted = [i for i, o in enumerate(node.outputs[:len(body.outputs)]) if o]
    body.outputs = [body.outputs[i] for i in wanted]
    outs: list[Any] = [None] * len(node.outputs)
    for i, v in zip(wanted, g.map_subgraph(body, bound, prefix=f"{node.name}/", expands=True)):
        outs[i] = v
    return outs


def function_fallback(node: OriginNode, version: int | None) -> MapFn | None:
    """The fallback the registry consults for an unmapped ONNX op: expand its function body."""
    if node.framework != Framework.ONNX:
        return None
    schema = _schema(node, version)
    if schema is None or not (schema.has_function or schema.has_context_dependent_function):
        return None
    return expand_function


def install(registry: MappingRegistry = DEFAULT_MAPPINGS) -> None:
    registry.add_fallback(function_fallback, name="onnx function body (onnx.defs)",
                          framework=Framework.ONNX)


install()
