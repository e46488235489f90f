"""ONNX attribute defaults and attribute names, from ``onnx.defs``, applied once per node.

Before a mapping body runs, :func:`with_schema_defaults` gives it the node with every absent
attribute that the op's schema (at the model's opset) declares a default for filled in, so a
mapping reads ``node.get_attr("epsilon")`` and never repeats a default. An attribute the
schema does not declare is an AttrError, as onnx's checker and onnxruntime refuse it, except
names starting with ``__``, which both skip (annotations, not attributes) and which are
therefore dropped here. Ops onnx.defs does not know but whose attributes are published
(onnxruntime's ``com.microsoft`` contrib ops) are declared with :func:`declare_schema` by the
module that maps them, and are treated the same. Nodes without any schema (other custom
domains, an opset before the op existed) are left as they are, for their mappings to check.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from onnx import defs

from ...errors import AttrError
from ...parsers.onnx import attribute_value
from ...parsers.origin import Framework, OriginNode
from ..context import error_context
from ..registry import normalize_domain

#: Declared defaults that are not the value an absent attribute means, so they are not filled
#: (the mapping decides), with the reason.
NOT_FILLED: dict[tuple[str, str], str] = {
    ("RNN", "activations"): "declared for two directions ([Tanh, Tanh]); a forward or reverse "
                            "RNN takes one per direction, as onnxruntime reads its absence",
}


#: Defaults that the operator's text gives where its schema declares none (since_version
#: of the schema, attribute) -> value.
TEXT_DEFAULTS: dict[tuple[str, int, str], Any] = {
    ("Concat", 1, "axis"): 1,  # "Which axis to concat on. Default value is 1."
    ("Split", 1, "axis"): 0,  # "Which axis to split on" (0 from Split-2 on, where it is declared)
}


@dataclass(frozen=True)
class SchemaAttrs:
    """What one op's schema at one opset says about attributes."""

    op_type: str
    since_version: int
    names: frozenset[str]
    defaults: Mapping[str, Any]


#: Schemas of ops that onnx.defs does not know (onnxruntime's ``com.microsoft`` contrib ops),
#: declared by the modules that map them with :func:`declare_schema`: (domain, op type) -> one
#: schema per since-version.
EXTRA_SCHEMAS: dict[tuple[str, str], dict[int, SchemaAttrs]] = {}


def declare_schema(domain: str, op_type: str, attrs: Mapping[str, Any], since: int = 1) -> None:
    """Declare the attributes of ``domain::op_type`` from version ``since``: name -> default
    (None: no default). Its nodes then get their defaults filled and unknown attributes refused,
    as ai.onnx nodes do."""
    names = frozenset(attrs)
    defaults = {k: v for k, v in attrs.items() if v is not None}
    EXTRA_SCHEMAS.setdefault((normalize_domain(domain), op_type), {})[since] = SchemaAttrs(
        op_type, since, names, defaults)
    schema_attrs.cache_clear()


def _extra_schema(op_type: str, domain: str, opset: int) -> SchemaAttrs | None:
    versions = EXTRA_SCHEMAS.get((normalize_domain(domain), op_type), {})
    usable = [v for v in versions if v <= opset]
    return versions[max(usable)] if usable else None


@cache
def schema_attrs(op_type: str, domain: str, opset: int) -> SchemaAttrs | None:
    """The attribute names and defaults of ``op_type`` at ``opset``; None without a schema."""
    try:
        schema = defs.get_schema(op_type, opset, normalize_domain(domain))
    except (defs.SchemaError, TypeError, OverflowError):  # TypeError: past the C int range
        return _extra_schema(op_type, domain, opset)
    defaults = {name: attribute_value(a.default_value) for name, a in schema.attributes.items()
                if a.default_value.name and (op_type, name) not in NOT_FILLED}
    for (op, since, name), value in TEXT_DEFAULTS.items():
        if op == op_type and since == schema.since_version and name in schema.attributes:
            defaults.setdefault(name, value)
    return SchemaAttrs(op_type, schema.since_version, frozenset(schema.attributes), defaults)


def with_schema_defaults(node: OriginNode, opset: int | None) -> OriginNode:
    """``node`` with its schema's defaults filled in (a copy; the origin graph stays as read),
    or an AttrError naming the node and an attribute its schema does not declare."""
    if node.framework != Framework.ONNX or opset is None:
        return node
    info = schema_attrs(node.op_type, normalize_domain(node.domain), opset)
    if info is None:
        return node
    given = {k: v for k, v in node.attrs.items() if not k.startswith("__")}
    unknown = sorted(set(given) - info.names)
    if unknown:
        takes = ", ".join(sorted(info.names)) or "no attributes"
        raise AttrError(
            f"not an attribute of {node.op_type} (opset {opset})",
            hint=f"{node.op_type} takes {takes}; remove '{unknown[0]}' from the node",
            **error_context(node, attribute=unknown[0], opset=opset),
        )
    missing = {k: v for k, v in info.defaults.items() if k not in given}
    if not missing and len(given) == len(node.attrs):
        return node
    filled = {k: (v.copy() if isinstance(v, np.ndarray) else copy.copy(v)) for k, v in missing.items()}
    return dataclasses.replace(node, attrs={**given, **filled})


def holds_schema_default(node: OriginNode, opset: int, name: str) -> bool:
    """Whether attribute ``name`` of ``node`` has the value its schema declares as default
    (as when it was absent and filled): a mapping that does not read it already behaves so."""
    info = schema_attrs(node.op_type, normalize_domain(node.domain), opset)
    if info is None or name not in info.defaults or name not in node.attrs:
        return False
    ours, theirs = node.attrs[name], info.defaults[name]
    if isinstance(ours, np.ndarray) or isinstance(theirs, np.ndarray):
        a, b = np.asarray(ours), np.asarray(theirs)
        return a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(ours, (list, tuple)) and isinstance(theirs, (list, tuple)):
        return list(ours) == list(theirs)
    return bool(ours == theirs)
