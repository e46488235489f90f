"""``prim::`` plumbing and scalar/shape arithmetic, resolved while converting.

Constants become IR constants only when they are tensors; lists and tuples were spread into
their users by the parser; ints computed from static shapes (``aten::size``) are 0-d
constants that later mappings read back as Python values.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import SCALAR_TYPES, Args, as_0d, cast, norm_axis, static_shape, ts_mapping
from .elementwise import bitwise, floor_divide

_DTYPE_CODES = {v: k for k, v in SCALAR_TYPES.items()}


@ts_mapping("prim::Constant")
def constant(node: OriginNode, g: MapContext) -> Any:
    value = node.get_attr("value", None)
    if isinstance(value, np.ndarray):
        return g.constant(value)
    return None  # a Python value: its users read it from their "consts"


@ts_mapping("prim::GetAttr")
def get_attr(node: OriginNode, g: MapContext) -> Any:
    if "value" not in node.attrs:
        raise g.unsupported(
            f"attribute '{node.get_attr('name', '?')}' was not resolved by freezing",
            hint="re-export with opbridge export-torchscript (it freezes the module)",
        )
    return constant(node, g)


@ts_mapping("prim::ListConstruct", "prim::TupleConstruct")
def construct(node: OriginNode, g: MapContext) -> Any:
    return None  # spread into every user by the parser


@ts_mapping("prim::ListUnpack", "prim::TupleUnpack")
def unpack(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    spec = a.spec[0] if a.spec else None
    if isinstance(spec, list):
        out = []
        for k in spec:
            if isinstance(k, list):
                raise g.unsupported("unpacking a nested list",
                                    hint="unpack one level at a time in forward() (a, b = xs; c, d = a), "
                                         "or return a flat tuple of tensors")
            if k in a.consts:
                c = a.consts[k]
                out.append(None if c is None or isinstance(c, str) else a.scalar_value(c))
            else:
                out.append(g.input(k))
        return out
    values = a.py(0, what="the list to unpack")
    return [a.scalar_value(v) for v in values]


@ts_mapping("aten::__is__", "aten::__isnot__")
def is_none_check(node: OriginNode, g: MapContext) -> Any:
    """``x is None`` / ``x is not None`` of an Optional argument: known while converting, since
    an absent optional is a None constant and anything else is not None."""
    a = Args(node, g)
    nones = [a.is_none(0), a.is_none(1)]
    if not any(nones):
        raise g.unsupported("compares two values by identity; only a comparison with None is "
                            "converted", hint="compare with == in the model")
    same = all(nones)
    return a.scalar_value(same if node.op_type == "__is__" else not same)


@ts_mapping("prim::unchecked_cast")
def unchecked_cast(node: OriginNode, g: MapContext) -> Any:
    """The refinement of an Optional to its value (after an ``is not None`` check): the value."""
    return Args(node, g).tensor(0, what="the value")


@ts_mapping("prim::TupleIndex", "aten::__getitem__")
def getitem(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    idx = a.int(1, what="index")
    spec = a.spec[0]
    if isinstance(spec, list):
        if not -len(spec) <= idx < len(spec):
            raise g.error(f"index {idx} is out of range for a list of {len(spec)}")
        k = spec[idx]
        if isinstance(k, int) and k not in a.consts:
            return g.input(k)
        return a.scalar_value(a.flat_py(k, "element"))
    values = a.py(0, what="the list")
    if not -len(values) <= idx < len(values):
        raise g.error(f"index {idx} is out of range for a list of {len(values)}")
    return a.scalar_value(values[idx])


@ts_mapping("prim::NumToTensor", "aten::Int", "aten::Float", "aten::Bool", "aten::ScalarImplicit",
            "aten::IntImplicit", "aten::FloatImplicit")
def scalar_cast(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    kind = node.op_type
    if not a.known(0):  # a value computed at run time: a 0-d tensor of the scalar's dtype
        return _runtime_scalar(g, a.tensor(0), kind)
    x = a.py(0, what="the scalar")
    x = np.asarray(x).item() if isinstance(x, np.ndarray) else x
    if kind in ("Int", "IntImplicit"):
        x = int(x)
    elif kind in ("Float", "FloatImplicit"):
        x = float(x)
    elif kind == "Bool":
        x = bool(x)
    return a.scalar_value(x)


_RUNTIME_CASTS = {"Int": "i64", "IntImplicit": "i64", "Float": "f64", "FloatImplicit": "f64",
                  "Bool": "bool"}


def _runtime_scalar(g: MapContext, v: Value, kind: str) -> Value:
    """``aten::Int(t)``/``Float``/``Bool`` and ``NumToTensor`` of a run-time value: its one
    element as a 0-d tensor (int64, float64, bool as torch's scalars are)."""
    v = as_0d(g, v, "the tensor converted to a number")
    to = _RUNTIME_CASTS.get(kind)
    return v if to is None or v.dtype == to else g.op("Cast", [v], to=to)


@ts_mapping("aten::size", "aten::sym_size")
def size(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    shape = static_shape(g, a.tensor(0))
    if len(a) > 1 and not a.is_none(1):
        return a.scalar_value(shape[norm_axis(g, a.int(1), len(shape))])
    return g.constant(np.asarray(shape, dtype=np.int64))


@ts_mapping("aten::dim")
def dim(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return a.scalar_value(len(a.tensor(0).shape))


@ts_mapping("aten::numel")
def numel(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return a.scalar_value(int(np.prod(static_shape(g, a.tensor(0)), dtype=np.int64)))


@ts_mapping("aten::len")
def length(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    if isinstance(a.spec[0], list):
        return a.scalar_value(len(a.spec[0]))
    v = a.py(0)
    return a.scalar_value(len(v) if isinstance(v, list) else int(np.shape(v)[0]))


@ts_mapping("aten::list")
def list_copy(node: OriginNode, g: MapContext) -> Any:
    """``list(xs)`` of a list known while converting (a scripted ``list(x.shape)``): its items,
    a copy nothing changes (lists changed in place are refused)."""
    a = Args(node, g)
    return a.list_value(*a.known_list(0, "the copied list"))


@ts_mapping("prim::dtype")
def dtype(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    return a.scalar_value(_DTYPE_CODES[a.tensor(0).dtype])


@ts_mapping("prim::device")
def device(node: OriginNode, g: MapContext) -> Any:
    return None  # devices are irrelevant to the IR; users read "cpu" from their consts


_INT_OPS = {
    "floordiv": operator.floordiv, "__and__": operator.and_,
    "__or__": operator.or_, "__not__": operator.not_,
}


@ts_mapping("aten::floordiv", "aten::__and__", "aten::__or__", "aten::__not__")
def int_arith(node: OriginNode, g: MapContext) -> Any:
    """Arithmetic on conversion-time ints and bools (scripted shape code); ``//``, ``&``, ``|``
    and ``not`` on tensors or run-time numbers are elementwise ops."""
    a = Args(node, g)
    runtime = [not a.known(i) for i in range(len(a))]  # tensors, or numbers only the run knows
    if node.op_type in ("__and__", "__or__") and any(runtime):
        return bitwise(node, g)
    if node.op_type == "floordiv" and any(runtime):  # a loop's iteration number // 2
        return floor_divide(node, g)
    if node.op_type == "__not__" and runtime[0]:  # a loop's `break` flag, a run-time condition
        return g.op("Not", [cast(g, a.tensor(0), "bool")])
    fn = _INT_OPS[node.op_type]
    args = [a.py(i, what=f"operand {i}") for i in range(len(a))]
    return a.scalar_value(fn(*args))


@ts_mapping("aten::append", "aten::insert", "aten::extend", "aten::_set_item", "aten::pop",
            "aten::clear")
def list_mutation(node: OriginNode, g: MapContext,
                  hint: str = "collect the results in a tensor instead (y = torch.cat([y, v.unsqueeze(0)]) "
                              "in the loop), or build the list in one expression") -> Any:
    """A list changed in place (results collected in a loop): the argument view spreads lists
    built once, and has no value for a list that changes."""
    raise g.unsupported(
        f"changes a list in place (aten::{node.op_type}); opbridge converts lists that are "
        "built once", hint=hint)
