"""ONNX mappings: elementwise math (unary functions, arithmetic, bitwise, variadic, Cast).

Semantics: https://onnx.ai/onnx/operators/. Versions whose meaning differs get their own
mapping: the binary ops before opset 7 broadcast B onto A at 'axis' (legacy broadcasting);
Cast-1 names its target type with a string, Cast-6+ with a TensorProto enum. Identity is
mapped in ``misc.py``. The helpers here are shared with ``activation.py`` and ``logical.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...errors import AttrError, UnsupportedOpError
from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ...sites import caller_site
from ..context import MapContext, error_context
from ..custom_op import DstOp, register_custom_op
from ..registry import DEFAULT_MAPPINGS, mapping
from .schema_defaults import holds_schema_default, schema_attrs

ONNX = Framework.ONNX
#: Attributes of opset-1 ops that only hinted at memory reuse; they mean nothing for inference.
LEGACY_HINTS = ("consumed_inputs",)


def known_attrs(node: OriginNode, opset: int | None, known: Iterable[str],
                ignored: Iterable[str] = ()) -> dict[str, Any]:
    """The node's attributes among ``known`` (the mapping's); any other, not ``ignored``, is an
    error unless it holds its schema default (a newer opset's attribute left at the meaning the
    mapping implements): an UnsupportedOpError when the schema declares it, else an AttrError."""
    known = tuple(known)
    for name in node.attrs:
        if name in known or name in ignored:
            continue
        if opset is not None and holds_schema_default(node, opset, name):
            continue
        info = schema_attrs(node.op_type, node.domain, opset) if opset is not None else None
        if info is not None and name in info.names:
            raise UnsupportedOpError(
                f"value {node.attrs[name]!r} is not supported yet",
                hint=f"opbridge maps {node.op_type} with '{name}' at its default only; register a "
                     "mapping for it (see docs/custom-ops.md) and pass it with --plugin",
                **error_context(node, attribute=name, opset=opset))
        takes = ", ".join(known) or "no attributes"
        raise AttrError(f"not an attribute of {node.op_type} (opset {opset})",
                        hint=f"{node.op_type} takes {takes}; remove '{name}' from the node",
                        **error_context(node, attribute=name, opset=opset))
    return {k: node.attrs[k] for k in known if k in node.attrs}


def checked_attrs(node: OriginNode, g: MapContext, known: Iterable[str],
                  ignored: Iterable[str] = ()) -> dict[str, Any]:
    """:func:`known_attrs` at the model's opset."""
    return known_attrs(node, g.opset, known, ignored)


def required_input(g: MapContext, i: int, what: str) -> Value:
    """Input ``i``, which must be present."""
    v = g.input(i)
    if v is None:
        raise g.error(f"input {i} ({what}) is required but absent",
                      hint="connect the input in the source model")
    return v


def one_to_one(op_type: str, since: int, *, ir_op: str | None = None, attrs: Iterable[str] = (),
               ignored: Iterable[str] = (), num_inputs: int = 1) -> None:
    """Register, through the public ``register_custom_op`` builder, a mapping from ``since``
    that passes ``num_inputs`` inputs (-1: all, at least one) and ``attrs`` unchanged.

    Absent attributes have their schema defaults (filled before the mapping runs), which the
    IR op declares too (a test checks that).
    """
    attrs, ignored = tuple(attrs), tuple(ignored)

    def parse(src: OriginNode, dst: DstOp) -> None:
        dst.attrs.update(known_attrs(src, dst.opset, attrs, ignored))

    (register_custom_op(ir_op or op_type, defined_at=caller_site(helpers=(one_to_one,)))
     .framework_type(ONNX).since_opset(since).num_inputs(num_inputs)
     .parse_params_by_operator_fn(parse).origin_op_type(op_type))


def _register(op_type: str, since: int, fn: Any) -> None:
    """Register a generated mapping, recording the line that asked for it (not these helpers)."""
    fn.__qualname__ = f"map_{op_type}_{since}"
    site = caller_site(helpers=(_register, one_to_one, legacy_binary))
    DEFAULT_MAPPINGS.register(ONNX, op_type, fn, since_opset=since, defined_at=site)


def legacy_broadcast(node: OriginNode, g: MapContext, a: Value, b: Value) -> Value:
    """ONNX < 7: with broadcast=1, B's dims line up with A's starting at 'axis' (default: the
    trailing dims, as numpy). B is reshaped with trailing 1s so numpy broadcasting agrees."""
    if not node.get_attr("broadcast") or "axis" not in node.attrs:
        return b
    ra, rb = len(a.shape), len(b.shape)
    axis = int(node.attrs["axis"])
    if not -ra <= axis < max(ra, 1):
        raise g.error(f"= {axis} is out of range for A of rank {ra}", attr="axis")
    axis %= max(ra, 1)
    trailing = ra - axis - rb
    if trailing < 0:
        raise g.error(f"B of rank {rb} does not fit in A of rank {ra} from axis {axis}", attr="axis",
                      hint="B's dims must line up with A's starting at 'axis'")
    if trailing == 0:
        return b
    return g.op("Reshape", [b], shape=tuple(b.shape) + (1,) * trailing)


def legacy_binary(op_type: str, ir_op: str | None = None) -> None:
    """Register ``op_type`` for opsets 1-6 (legacy broadcast/axis attributes)."""

    def map_legacy_binary(node: OriginNode, g: MapContext) -> Any:
        checked_attrs(node, g, ("broadcast", "axis"), LEGACY_HINTS)
        a, b = required_input(g, 0, "A"), required_input(g, 1, "B")
        return g.op(ir_op or op_type, [a, legacy_broadcast(node, g, a, b)])

    _register(op_type, 1, map_legacy_binary)


# -- unary ---------------------------------------------------------------------------------
for _op, _since in (
    ("Abs", 1), ("Neg", 1), ("Exp", 1), ("Log", 1), ("Sqrt", 1), ("Reciprocal", 1), ("Floor", 1),
    ("Ceil", 1), ("Round", 11), ("Sign", 9), ("Erf", 9),
    ("Sin", 7), ("Cos", 7), ("Tan", 7), ("Asin", 7), ("Acos", 7), ("Atan", 7),
    ("Sinh", 9), ("Cosh", 9), ("Asinh", 9), ("Acosh", 9), ("Atanh", 9),
):
    one_to_one(_op, _since, ignored=LEGACY_HINTS)

# -- binary --------------------------------------------------------------------------------
for _op in ("Add", "Sub", "Mul", "Div", "Pow"):
    legacy_binary(_op)
    one_to_one(_op, 7, num_inputs=2)  # numpy broadcasting; Pow-12+ also mixes dtypes (the IR does)

one_to_one("Mod", 10, attrs=("fmod",), num_inputs=2)
one_to_one("BitShift", 11, attrs=("direction",), num_inputs=2)
for _op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
    one_to_one(_op, 18, num_inputs=2)
one_to_one("BitwiseNot", 18)

# -- variadic (numpy broadcasting from opset 8; equal shapes before, which is a special case) --
for _op in ("Sum", "Mean", "Max", "Min"):
    one_to_one(_op, 1, ignored=LEGACY_HINTS, num_inputs=-1)


# -- Cast ----------------------------------------------------------------------------------
#: TensorProto.DataType -> IR dtype, for the types the IR has.
ONNX_DTYPES = {1: "f32", 2: "u8", 3: "i8", 4: "u16", 5: "i16", 6: "i32", 7: "i64", 9: "bool",
               10: "f16", 11: "f64", 12: "u32", 13: "u64", 16: "bf16",
               17: "f8e4m3fn", 18: "f8e4m3fnuz", 19: "f8e5m2", 20: "f8e5m2fnuz", 21: "u4", 22: "i4",
               23: "f4e2m1", 24: "f8e8m0", 25: "u2", 26: "i2"}
#: Cast-1's string names of the same types.
ONNX_DTYPE_NAMES = {"FLOAT": 1, "UINT8": 2, "INT8": 3, "UINT16": 4, "INT16": 5, "INT32": 6,
                    "INT64": 7, "BOOL": 9, "FLOAT16": 10, "DOUBLE": 11, "UINT32": 12, "UINT64": 13,
                    "BFLOAT16": 16}
#: Cast-19+ (saturate) and Cast-24+ (round_mode) attributes: they change casts to float8 only.
FLOAT8_ATTRS = ("saturate", "round_mode")


def ir_dtype(g: MapContext, code: Any) -> str:
    """The IR dtype for a TensorProto.DataType code (an error naming 'to' if there is none)."""
    try:
        return ONNX_DTYPES[int(code)]
    except (KeyError, TypeError, ValueError):
        raise g.unsupported(
            f"casting to TensorProto type {code!r} is not supported (the IR has "
            f"{', '.join(sorted(set(ONNX_DTYPES.values())))})",
            hint="cast to one of those types in the source model") from None


@mapping(ONNX, "Cast", since_opset=1)
def cast_v1(node: OriginNode, g: MapContext) -> Any:
    # Cast-1: 'to' is the type's name as a string ("FLOAT")
    checked_attrs(node, g, ("to",))
    to = node.get_attr("to")
    if isinstance(to, str):
        if to.upper() not in ONNX_DTYPE_NAMES:
            raise g.unsupported(f"casting to '{to}' is not supported",
                                hint=f"the IR has {', '.join(ONNX_DTYPE_NAMES)}")
        to = ONNX_DTYPE_NAMES[to.upper()]
    return g.op("Cast", [required_input(g, 0, "input")], to=ir_dtype(g, to))


@mapping(ONNX, "Cast", since_opset=6)
def cast_v6(node: OriginNode, g: MapContext) -> Any:
    attrs = checked_attrs(node, g, ("to", *FLOAT8_ATTRS))
    attrs["to"] = ir_dtype(g, attrs.get("to"))
    return g.op("Cast", [required_input(g, 0, "input")], **attrs)


one_to_one("CastLike", 15, attrs=FLOAT8_ATTRS, num_inputs=2)
