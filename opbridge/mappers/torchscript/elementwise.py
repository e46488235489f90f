"""Elementwise arithmetic, comparisons, unary math and selection (``where``, ``masked_fill``).

Operands may be tensors or Python numbers (torch "Scalar" overloads). When every operand is
known while converting (shape arithmetic), the result is computed at once with torch's
typing (int op int stays int, ``/`` is true division).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...ir.types import to_numpy_dtype
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, as_array, cast, one_to_one, ts_mapping, with_inplace

_FLOAT_RANK = {"f16": 1, "bf16": 1, "f32": 2, "f64": 3}
_INT_RANK = {"bool": 0, "u8": 1, "i8": 1, "i16": 2, "i32": 3, "i64": 4}


def promote(x: str, y: str) -> str:
    """The dtype torch gives an op on tensors of dtypes x and y (both dimensioned)."""
    if {x, y} in ({"u8", "i8"}, {"f16", "bf16"}):  # neither holds the other's range
        return "i16" if x[0] in "ui" else "f32"
    fx, fy = x in _FLOAT_RANK, y in _FLOAT_RANK
    if fx != fy:
        return x if fx else y
    rank = _FLOAT_RANK if fx else _INT_RANK
    return x if rank.get(x, 0) >= rank.get(y, 0) else y


def _dimensioned(a: Args, i: int) -> bool:
    """A tensor that takes part in type promotion (torch: not a number, not a known 0-d tensor)."""
    if not a.is_tensor(i):
        return False
    if a.known(i):
        return np.ndim(a.py(i)) > 0
    return True


def operands(a: Args, i: int, j: int) -> tuple[Value, Value]:
    """Two operands as Values of one dtype, promoted as torch does: a Python number or a 0-d
    conversion-time tensor takes the other operand's dtype (float beats int)."""
    di, dj = _dimensioned(a, i), _dimensioned(a, j)
    if di == dj and (di or not (a.known(i) and a.known(j))):
        if not di and a.known(i) != a.known(j):  # a run-time 0-d tensor and a number
            return _with_scalar(a, j, i) if a.known(i) else _with_scalar(a, i, j)
        x, y = a.tensor(i), a.tensor(j)
        dt = promote(x.dtype, y.dtype)
        return cast(a.g, x, dt), cast(a.g, y, dt)
    if di == dj:  # both known numbers: the caller folds; promote like torch anyway
        x, y = a.tensor(i), a.tensor(j)
        dt = promote(x.dtype, y.dtype)
        return cast(a.g, x, dt), cast(a.g, y, dt)
    return _with_scalar(a, i, j) if di else _with_scalar(a, j, i)


def _with_scalar(a: Args, t_idx: int, s_idx: int) -> tuple[Value, Value]:
    t = a.tensor(t_idx)
    if not a.known(s_idx):  # an int/float/bool computed at run time (a loop's iteration number)
        s = a.tensor(s_idx)
        if s.dtype in _FLOAT_RANK and t.dtype not in _FLOAT_RANK:
            t = cast(a.g, t, "f32")
        c = cast(a.g, s, t.dtype)
        return (t, c) if t_idx < s_idx else (c, t)
    s_arr = as_array(a.py(s_idx))
    if s_arr.dtype.kind == "f" and t.dtype not in _FLOAT_RANK:
        t = cast(a.g, t, "f32")
    c = a.scalar_value(s_arr.reshape(()), like=t)
    return (t, c) if t_idx < s_idx else (c, t)


def _all_known(a: Args, idx: tuple[int, ...]) -> bool:
    return all(a.known(i) for i in idx)


def _fold(a: Args, fn: Any, idx: tuple[int, ...]) -> Value:
    """Compute at once; the result has the dtype torch would give (numbers defer to tensors)."""
    vals = [as_array(a.py(i)) for i in idx]
    out = np.asarray(fn(*vals))
    tensors = [v for i, v in zip(idx, vals) if _dimensioned(a, i)]
    if tensors and out.dtype != np.bool_:
        dt = np.result_type(*tensors)
        if dt.kind in "biu" and (out.dtype.kind == "f" or any(v.dtype.kind == "f" for v in vals)):
            dt = np.dtype(np.float32)
        out = out.astype(dt)
    return a.g.constant(as_array(out[()] if out.ndim == 0 else out))


def _alpha(a: Args, idx: int) -> Any:
    return a.py(idx, 1) if len(a) > idx else 1


def _refuse_list_in_place(node: OriginNode, g: MapContext) -> None:
    """``xs += ys`` / ``xs *= n`` change the list itself, which every reader of ``xs`` would see:
    opbridge converts lists built once (as for aten::append)."""
    if node.op_type.endswith("_"):
        from .prim import list_mutation

        list_mutation(node, g, hint="build a new list in one expression (xs = xs + ys, xs = xs * n)")


@ts_mapping(*with_inplace("add", "sub"))
def add_sub(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    if a.list_type(0) is not None:  # aten::add.t: two lists concatenate
        _refuse_list_in_place(node, g)
        first, kind = a.known_list(0, "the first list")
        return a.list_value(first + a.known_list(1, "the second list")[0], kind)
    sub = node.op_type.startswith("sub")
    alpha = _alpha(a, 2)
    if _all_known(a, (0, 1)):
        return _fold(a, (lambda x, y: x - alpha * y) if sub else (lambda x, y: x + alpha * y), (0, 1))
    x, y = operands(a, 0, 1)
    if alpha != 1:
        y = g.op("Mul", [y, a.scalar_value(alpha, like=y)])
    return g.op("Sub" if sub else "Add", [x, y])


@ts_mapping("rsub")
def rsub(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    alpha = _alpha(a, 2)
    if _all_known(a, (0, 1)):
        return _fold(a, lambda x, y: y - alpha * x, (0, 1))
    x, y = operands(a, 0, 1)
    if alpha != 1:
        x = g.op("Mul", [x, a.scalar_value(alpha, like=x)])
    return g.op("Sub", [y, x])


@ts_mapping(*with_inplace("mul"), "multiply")
def mul(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    at = next((i for i in (0, 1) if a.list_type(i) is not None), None)
    if at is not None:  # aten::mul.left_t / right_: a list repeated n times
        _refuse_list_in_place(node, g)
        items, kind = a.known_list(at, "the repeated list")
        return a.list_value(items * a.int(1 - at, what="the repeat count"), kind)
    if _all_known(a, (0, 1)):
        return _fold(a, lambda x, y: x * y, (0, 1))
    return g.op("Mul", list(operands(a, 0, 1)))


def _trunc_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    q = np.trunc(np.true_divide(x, y))
    return q.astype(np.result_type(x, y)) if x.dtype.kind in "iu" and y.dtype.kind in "iu" else q


def _floor_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """numpy's floor_divide is Python's and torch's (on floats too: 2.1 // 0.7 is 2)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor_divide(x, y)


@ts_mapping(*with_inplace("div"), "divide", "true_divide")
def div(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    mode = a.py(2) if len(a) > 2 else None
    if _all_known(a, (0, 1)):
        fn = {None: np.true_divide, "trunc": _trunc_div, "floor": _floor_div}[mode]
        return _fold(a, fn, (0, 1))
    x, y = operands(a, 0, 1)
    if mode is None and x.dtype not in _FLOAT_RANK:
        x, y = cast(g, x, "f32"), cast(g, y, "f32")
    if mode == "floor":
        return _floor_divide(g, x, y)
    q = g.op("Div", [x, y])
    if mode == "trunc" and q.dtype in _FLOAT_RANK:
        # trunc(q) = sign(q) * floor(|q|)
        return g.op("Mul", [g.op("Sign", [q]), g.op("Floor", [g.op("Abs", [q])])])
    return q  # integer Div truncates toward zero, as torch's "trunc"


def _floor_divide(g: MapContext, x: Value, y: Value) -> Value:
    """x // y as torch computes it, exact on integers: (x - x mod y) / y with the Python-sign
    ``mod`` (the IR's integer Div truncates toward zero). Floats follow torch's
    div_floor_floating (c10/util/generic_math.h) step by step, so the edge cases agree too:
    1 // -inf is -1 (not nan), a zero quotient carries the sign of x / y, x // 0 is x / 0."""
    if x.dtype not in _FLOAT_RANK:
        return g.op("Div", [g.op("Sub", [x, g.op("Mod", [x, y], fmod=0)]), y])
    dt = to_numpy_dtype(x.dtype)

    def k(v: float) -> Value:
        return g.constant(np.asarray(v, dt))

    mod = g.op("Mod", [x, y], fmod=1)
    div = g.op("Div", [g.op("Sub", [x, mod]), y])
    # fmod has x's sign: step down where it is non-zero and its sign differs from y's
    signs_differ = g.op("Xor", [g.op("Less", [y, k(0)]), g.op("Less", [mod, k(0)])])
    step = g.op("And", [g.op("Not", [g.op("Equal", [mod, k(0)])]), signs_differ])
    div = g.op("Where", [step, g.op("Sub", [div, k(1)]), div])
    # the quotient is an integer up to rounding: floor, then up where it was just below
    floor = g.op("Floor", [div])
    up = g.op("Greater", [g.op("Sub", [div, floor]), k(0.5)])
    q = g.op("Where", [up, g.op("Add", [floor, k(1)]), floor])
    true_q = g.op("Div", [x, y])
    # a zero quotient is copysign(0, x / y); x / y is finite there, so x / y * 0 is that zero
    q = g.op("Where", [g.op("Equal", [div, k(0)]), g.op("Mul", [true_q, k(0)]), q])
    if y.data is not None and np.all(np.asarray(y.data) != 0):
        return q
    return g.op("Where", [g.op("Equal", [y, k(0)]), true_q, q])


@ts_mapping("floor_divide")
def floor_divide(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    if _all_known(a, (0, 1)):
        return _fold(a, _floor_div, (0, 1))
    return _floor_divide(g, *operands(a, 0, 1))


@ts_mapping("remainder", "fmod")
def remainder(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    fmod = node.op_type == "fmod"
    if _all_known(a, (0, 1)):
        return _fold(a, np.fmod if fmod else np.mod, (0, 1))
    # Mod is numpy's mod / fmod, which torch's remainder / fmod agree with on floats too
    # (x - floor(x / y) * y is off by y where x / y rounds up to an integer)
    return g.op("Mod", list(operands(a, 0, 1)), fmod=int(fmod))


@ts_mapping(*with_inplace("pow"))
def pow_(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    if _all_known(a, (0, 1)):
        return _fold(a, np.power, (0, 1))
    if not a.is_tensor(1) or a.known(1):
        e = a.py(1)
        if np.ndim(e) == 0 and float(np.asarray(e)) == 2.0:
            x = a.tensor(0)
            return g.op("Mul", [x, x])
    return g.op("Pow", list(operands(a, 0, 1)))


@ts_mapping("maximum", "minimum", "fmax", "fmin")
def max_min(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    op = "Max" if node.op_type in ("maximum", "fmax") else "Min"
    return g.op(op, list(operands(a, 0, 1)))


_COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual",
            "ne": "Equal", "greater": "Greater", "less": "Less"}
_COMPARE_NP = {"eq": np.equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
               "ge": np.greater_equal, "ne": np.not_equal, "greater": np.greater, "less": np.less}


@ts_mapping(*_COMPARE)
def compare(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    if _all_known(a, (0, 1)):
        return _fold(a, _COMPARE_NP[node.op_type], (0, 1))
    y = g.op(_COMPARE[node.op_type], list(operands(a, 0, 1)))
    return g.op("Not", [y]) if node.op_type == "ne" else y


_LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}
#: torch's bitwise ops (and the ``&``, ``|``, ``^`` operators on tensors): the logical IR op on
#: bools, the bitwise one on integers
_BITWISE = {"bitwise_and": ("And", "BitwiseAnd"), "bitwise_or": ("Or", "BitwiseOr"),
            "bitwise_xor": ("Xor", "BitwiseXor"), "__and__": ("And", "BitwiseAnd"),
            "__or__": ("Or", "BitwiseOr"), "__xor__": ("Xor", "BitwiseXor")}
#: ``x &= m`` and ``x.bitwise_and_(m)``: the same op, written into x (its dtype kept)
_BITWISE_INPLACE = {"__iand__": "__and__", "__ior__": "__or__", "__ixor__": "__xor__",
                    **{f"{k}_": k for k in ("bitwise_and", "bitwise_or", "bitwise_xor")}}


@ts_mapping(*with_inplace("logical_and", "logical_or", "logical_xor"))
def logical(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x, y = (cast(g, a.tensor(i), "bool") for i in (0, 1))
    out = g.op(_LOGICAL[node.op_type.rstrip("_")], [x, y])
    return cast(g, out, a.tensor(0).dtype) if node.op_type.endswith("_") else out


@ts_mapping("bitwise_and", "bitwise_or", "bitwise_xor", "__xor__", *_BITWISE_INPLACE)
def bitwise(node: OriginNode, g: MapContext) -> Any:
    """Also reached from prim.py's ``__and__``/``__or__`` when an operand is a tensor."""
    a = Args(node, g)
    x = a.tensor(0) if a.is_tensor(0) else None
    y = a.tensor(1, like=x)
    x = x if x is not None else a.tensor(0, like=y)
    if node.op_type in _BITWISE_INPLACE:
        return cast(g, _bitwise(g, _BITWISE_INPLACE[node.op_type], x, y), x.dtype)
    return _bitwise(g, node.op_type, x, y)


def _bitwise(g: MapContext, kind: str, x: Value, y: Value) -> Value:
    logical_op, bitwise_op = _BITWISE[kind]
    if x.dtype == "bool" and y.dtype == "bool":
        return g.op(logical_op, [x, y])
    if x.dtype[0] not in "bui" or y.dtype[0] not in "bui" or x.dtype.startswith("bf"):
        raise g.error(f"{kind} of {x.dtype} and {y.dtype}: torch takes integer or bool tensors",
                      hint="cast the operands to an integer or bool dtype in the model")
    if x.dtype != y.dtype:  # a bool operand takes the integer operand's dtype, as torch promotes
        x, y = (cast(g, v, y.dtype if x.dtype == "bool" else x.dtype) for v in (x, y))
    return g.op(bitwise_op, [x, y])


@ts_mapping(*with_inplace("logical_not", "bitwise_not"))
def logical_not(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    dtype = a.tensor(0).dtype
    x = a.tensor(0)
    if node.op_type.startswith("logical_not"):
        x = cast(g, x, "bool")
    out = g.op("Not" if x.dtype == "bool" else "BitwiseNot", [x])
    return cast(g, out, dtype) if node.op_type.endswith("_") else out


@ts_mapping("where")
def where(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    if len(a) == 1:
        raise g.unsupported("torch.where(condition) has a data-dependent shape",
                            hint="torch.where(cond) returns the indices of the true entries, whose number "
                                 "only the run knows: use torch.where(cond, a, b) or a mask (x * cond) "
                                 "instead")
    cond = cast(g, a.tensor(0), "bool")
    x, y = operands(a, 1, 2)
    return g.op("Where", [cond, x, y])


@ts_mapping(*with_inplace("masked_fill"))
def masked_fill(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0)
    mask = cast(g, a.tensor(1), "bool")
    value = a.tensor(2, like=x) if not a.is_tensor(2) else cast(g, a.tensor(2), x.dtype)
    return g.op("Where", [mask, value, x])


#: Unary ops that fold Python numbers or compute integers in f32, as torch does.
_UNARY = {
    "abs": "Abs", "neg": "Neg", "negative": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
    "reciprocal": "Reciprocal", "floor": "Floor", "ceil": "Ceil", "sin": "Sin", "cos": "Cos",
    "tan": "Tan", "erf": "Erf", "sigmoid": "Sigmoid", "tanh": "Tanh", "asin": "Asin",
    "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
}
#: torch computes these on an integer or bool tensor in its default float dtype (f32)
_TO_FLOAT = frozenset(("exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "erf",
                       "sigmoid", "tanh", "asin", "acos", "atan", "sinh", "cosh"))
one_to_one("Sign", *with_inplace("sign"))
_UNARY_NP = {"abs": np.abs, "neg": np.negative, "negative": np.negative, "floor": np.floor,
             "ceil": np.ceil, "sqrt": np.sqrt}


@ts_mapping(*with_inplace(*_UNARY))
def unary(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    kind = node.op_type.rstrip("_")
    if kind in _UNARY_NP and a.known(0) and not a.is_tensor(0):
        return _fold(a, _UNARY_NP[kind], (0,))
    return g.op(_UNARY[kind], [_unary_input(a, kind)])


def _unary_input(a: Args, kind: str) -> Value:
    x = a.tensor(0)
    return cast(a.g, x, "f32") if kind in _TO_FLOAT and x.dtype not in _FLOAT_RANK else x


@ts_mapping(*with_inplace("round"))
def round_(node: OriginNode, g: MapContext) -> Any:
    """round(x, decimals=0), half to even; with decimals as torch computes it: x * 10**d rounded,
    then divided by 10**d (for d < 0: x / 10**-d rounded, times 10**-d)."""
    a = Args(node, g)
    x = a.tensor(0)
    decimals = a.int(1, 0, what="decimals")
    if not decimals or x.dtype not in _FLOAT_RANK:
        return g.op("Round", [x])
    ten = a.scalar_value(10.0 ** abs(decimals), like=x)
    inner, outer = ("Mul", "Div") if decimals > 0 else ("Div", "Mul")
    return g.op(outer, [g.op("Round", [g.op(inner, [x, ten])]), ten])


@ts_mapping(*with_inplace("rsqrt"))
def rsqrt(node: OriginNode, g: MapContext) -> Any:
    return g.op("Reciprocal", [g.op("Sqrt", [_unary_input(Args(node, g), "rsqrt")])])


@ts_mapping(*with_inplace("square"))
def square(node: OriginNode, g: MapContext) -> Any:
    x = Args(node, g).tensor(0)
    return g.op("Mul", [x, x])


@ts_mapping(*with_inplace("addcmul", "addcdiv", "lerp"))
def pointwise3(node: OriginNode, g: MapContext) -> Any:
    """``addcmul(x, t1, t2, value)`` = x + value·t1·t2, ``addcdiv`` = x + value·t1/t2,
    ``lerp(x, end, weight)`` = x + weight·(end − x); float tensors of one dtype."""
    a = Args(node, g)
    x = a.tensor(0)
    kind = node.op_type.rstrip("_")
    t1 = cast(g, a.tensor(1), x.dtype)
    if kind == "lerp":
        w = cast(g, a.tensor(2), x.dtype) if a.is_tensor(2) else a.tensor(2, like=x)
        return g.op("Add", [x, g.op("Mul", [w, g.op("Sub", [t1, x])])])
    t2 = cast(g, a.tensor(2), x.dtype)
    y = g.op("Mul" if kind == "addcmul" else "Div", [t1, t2])
    if not a.is_none(3) and a.py(3) != 1:
        y = g.op("Mul", [y, a.tensor(3, like=x)])
    return g.op("Add", [x, y])
