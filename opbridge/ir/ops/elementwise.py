"""Elementwise math: unary functions, binary arithmetic with numpy broadcasting, variadic
Sum/Mean/Max/Min, bitwise ops, and Cast (ONNX semantics, names and defaults)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from ..opdef import ShapeContext, define_op
from ..types import to_numpy_dtype
from .activation import erf, via_f32, widen
from .common import ALL, FLOATS, INTS, LOWP, NUMERIC, SIGNED, broadcast_fn, same_shape

# -- unary ---------------------------------------------------------------------------------
# (op, input name, output name, dtypes, numpy function, doc); f16/bf16 computed in f32.
_UNARY: tuple[tuple[str, str, str, tuple[str, ...], Callable[[np.ndarray], Any], str], ...] = (
    ("Abs", "x", "y", NUMERIC, np.abs, "|x|"),
    ("Neg", "x", "y", FLOATS + SIGNED, np.negative, "-x (integers wrap)"),
    ("Exp", "input", "output", FLOATS, np.exp, "e ** x"),
    ("Log", "input", "output", FLOATS, np.log, "natural logarithm (nan below 0, -inf at 0)"),
    ("Sqrt", "x", "y", FLOATS, np.sqrt, "square root (nan below 0)"),
    ("Reciprocal", "x", "y", FLOATS, np.reciprocal, "1 / x"),
    ("Floor", "x", "y", FLOATS, np.floor, "largest integer <= x"),
    ("Ceil", "x", "y", FLOATS, np.ceil, "smallest integer >= x"),
    ("Round", "x", "y", FLOATS, np.round, "nearest integer, halves to even"),
    ("Sign", "input", "output", NUMERIC, np.sign, "-1, 0 or 1 (nan stays nan)"),
    ("Erf", "input", "output", FLOATS, erf, "the error function"),
    ("Sin", "input", "output", FLOATS, np.sin, "sine"),
    ("Cos", "input", "output", FLOATS, np.cos, "cosine"),
    ("Tan", "input", "output", FLOATS, np.tan, "tangent"),
    ("Asin", "input", "output", FLOATS, np.arcsin, "arcsine"),
    ("Acos", "input", "output", FLOATS, np.arccos, "arccosine"),
    ("Atan", "input", "output", FLOATS, np.arctan, "arctangent"),
    ("Sinh", "input", "output", FLOATS, np.sinh, "hyperbolic sine"),
    ("Cosh", "input", "output", FLOATS, np.cosh, "hyperbolic cosine"),
    ("Asinh", "input", "output", FLOATS, np.arcsinh, "inverse hyperbolic sine"),
    ("Acosh", "input", "output", FLOATS, np.arccosh, "inverse hyperbolic cosine"),
    ("Atanh", "input", "output", FLOATS, np.arctanh, "inverse hyperbolic tangent"),
)

for _name, _in, _out, _types, _fn, _doc in _UNARY:
    (
        define_op(_name)
        .doc(_doc)
        .input(_in, "T").output(_out, "T")
        .type_param("T", _types)
        .shape_fn(same_shape)
        .compute(via_f32(_fn))
    )

(
    define_op("Identity")
    .doc("the input, unchanged")
    .input("input", "T").output("output", "T")
    .type_param("T", ALL + LOWP)
    .shape_fn(same_shape)
    .compute(lambda x: x)
)


# -- binary arithmetic ---------------------------------------------------------------------
def binary(fn: Callable[..., Any]) -> Callable[..., np.ndarray]:
    """A binary compute: ``fn(a, b, **params)`` on widened, broadcast inputs; the result has a's
    dtype. ``fn`` takes the two arrays and the op's params as keywords (``Mod`` takes ``fmod``)."""

    def compute(a: np.ndarray, b: np.ndarray, **params: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(fn(widen(a), widen(b), **params)).astype(a.dtype, copy=False)

    return compute


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Float division, or integer division truncated toward zero (C semantics, as ONNX)."""
    if a.dtype.kind not in "iu":
        return np.divide(a, b)
    q = np.floor_divide(a, b)
    if a.dtype.kind == "i":
        # floor and truncation differ when the signs differ and the division is inexact
        q = q + ((np.multiply(q, b) != a) & ((a < 0) != (b < 0))).astype(q.dtype)
    return q


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x ** y in x's dtype, computed in f64 unless both are integers and y >= 0."""
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu":
            if y.dtype.kind in "iu" and not (y < 0).any():
                return np.power(x, y.astype(x.dtype)).astype(x.dtype)
            return np.power(x.astype(np.float64), y.astype(np.float64)).astype(x.dtype)
        return np.power(x.astype(np.float64), y.astype(np.float64)).astype(x.dtype)


def _mod(a: np.ndarray, b: np.ndarray, fmod: int) -> np.ndarray:
    return np.fmod(a, b) if fmod else np.mod(a, b)


def _bitshift(x: np.ndarray, y: np.ndarray, direction: str) -> np.ndarray:
    """Shifts by amounts outside [0, bits) give what the sign extension alone gives (ONNX)."""
    bits = x.dtype.itemsize * 8
    inside = (y >= 0) & (y < bits)
    amount = np.where(inside, y, 0).astype(x.dtype)
    if direction == "LEFT":
        return np.where(inside, np.left_shift(x, amount), 0).astype(x.dtype)
    fill = np.where(x < 0, -1, 0) if x.dtype.kind == "i" else 0
    return np.where(inside, np.right_shift(x, amount), fill).astype(x.dtype)


# (op, numpy function of two arrays, doc)
_ARITH: tuple[tuple[str, Callable[[np.ndarray, np.ndarray], Any], str], ...] = (
    ("Add", np.add, "a + b"),
    ("Sub", np.subtract, "a - b"),
    ("Mul", np.multiply, "a * b"),
    ("Div", _div, "a / b; integer division truncates toward zero"),
)

for _name, _binary_fn, _doc in _ARITH:
    (
        define_op(_name)
        .doc(_doc + " (numpy broadcasting; integers wrap)")
        .input("a", "T").input("b", "T").output("c", "T")
        .type_param("T", NUMERIC)
        .shape_fn(broadcast_fn())
        .compute(binary(_binary_fn))
    )

(
    define_op("Pow")
    .doc("x ** y in x's dtype; y may have another numeric dtype (numpy broadcasting)")
    .input("x", "T").input("y", "T1").output("z", "T")
    .type_param("T", FLOATS + ("i32", "i64"))
    .type_param("T1", NUMERIC)
    .shape_fn(broadcast_fn())
    .compute(_pow)
)

(
    define_op("Mod")
    .doc("remainder: a - floor(a / b) * b, the sign of b (fmod=0), or a - trunc(a / b) * b, "
         "the sign of a (fmod=1)")
    .input("a", "T").input("b", "T").output("c", "T")
    .param("fmod", "int", default=0, allowed=(0, 1))
    .type_param("T", NUMERIC)
    .shape_fn(broadcast_fn())
    .compute(binary(_mod))
)

(
    define_op("BitShift")
    .doc("x shifted by y bits; RIGHT is arithmetic for signed types")
    .input("x", "T").input("y", "T").output("z", "T")
    .param("direction", "str", allowed=("LEFT", "RIGHT"))
    .type_param("T", INTS)
    .shape_fn(broadcast_fn())
    .compute(_bitshift)
)

_BITWISE: tuple[tuple[str, np.ufunc], ...] = (
    ("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or), ("BitwiseXor", np.bitwise_xor),
)

for _name, _ufunc in _BITWISE:
    (
        define_op(_name)
        .doc(f"{_ufunc.__name__} of the integer bit patterns (numpy broadcasting)")
        .input("a", "T").input("b", "T").output("c", "T")
        .type_param("T", INTS)
        .shape_fn(broadcast_fn())
        .compute(_ufunc)
    )

(
    define_op("BitwiseNot")
    .doc("bitwise complement")
    .input("x", "T").output("y", "T")
    .type_param("T", INTS)
    .shape_fn(same_shape)
    .compute(np.invert)
)


# -- variadic ------------------------------------------------------------------------------
def _fold(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], mean: bool = False) -> Callable[..., Any]:
    """A compute over any number of inputs, folded left to right (f16/bf16 through f32)."""

    def compute(*xs: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            acc = widen(xs[0])
            for x in xs[1:]:
                acc = fn(acc, widen(x))
            if mean:
                acc = acc / acc.dtype.type(len(xs))
            shape = np.broadcast_shapes(*(x.shape for x in xs))
            return np.broadcast_to(acc, shape).astype(xs[0].dtype)

    return compute


# (op, output name, dtypes, the fold's binary function, divide by the count, doc)
_VARIADIC: tuple[
    tuple[str, str, tuple[str, ...], Callable[[np.ndarray, np.ndarray], np.ndarray], bool, str], ...
] = (
    ("Sum", "sum", FLOATS, np.add, False, "elementwise sum of all inputs"),
    ("Mean", "mean", FLOATS, np.add, True, "elementwise mean of all inputs"),
    ("Max", "max", NUMERIC, np.maximum, False, "elementwise maximum of all inputs (nan propagates)"),
    ("Min", "min", NUMERIC, np.minimum, False, "elementwise minimum of all inputs (nan propagates)"),
)

for _name, _out, _types, _fold_fn, _mean, _doc in _VARIADIC:
    (
        define_op(_name)
        .doc(_doc + " (numpy broadcasting)")
        .input("inputs", "T", variadic=True).output(_out, "T")
        .type_param("T", _types)
        .shape_fn(broadcast_fn())
        .compute(_fold(_fold_fn, _mean))
    )


# -- casts ---------------------------------------------------------------------------------
#: float8 types whose Cast-19+ ``saturate=1`` clamps finite and infinite values to +-max
#: (https://onnx.ai/onnx/operators/onnx__Cast.html, "saturate" table); NaN stays NaN.
_SATURATING = tuple(
    np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                          ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz)
)
_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
ROUND_MODES = ("up", "down", "nearest")


def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """float8 e8m0 (a bare exponent, 2**(e-127); code 0xFF is NaN) from the float32 bits of x.

    ONNX Cast-24: the sign is dropped; inf and NaN give NaN; a non-zero mantissa rounds the
    exponent up ("up"), not at all ("down"), or up from half of it ("nearest"; a subnormal's
    exact half stays down). With saturate, rounding never carries the largest exponent into NaN."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    exp = ((bits >> 23) & 0xFF).astype(np.uint16)
    frac = bits & 0x7FFFFF
    special = exp == 0xFF
    if round_mode == "up":
        up = frac != 0
    elif round_mode == "nearest":
        up = ((frac & 0x400000) != 0) & (((frac & 0x3FFFFF) != 0) | (exp > 0))
    else:
        up = np.zeros(exp.shape, dtype=bool)
    up &= ~special
    if saturate:
        up &= exp != 0xFE
    out = np.where(special, 0xFF, exp + up).astype(np.uint8)
    return out.view(_E8M0)


def cast_array(x: np.ndarray, to: np.dtype, saturate: int = 1, round_mode: str = "up") -> np.ndarray:
    """ONNX Cast: float->int truncates toward zero, int->int wraps, to bool is x != 0
    (nan -> True), float narrowing rounds to nearest even and overflows to inf. To float8
    with ``saturate`` (Cast-19+), out-of-range values (inf included) clamp to +-max; without
    it they follow the type (inf, or NaN where it has no inf). float4 and int4/int2 follow
    ml_dtypes' conversions, as onnx.reference does; e8m0 takes ``round_mode`` (Cast-24)."""
    with np.errstate(all="ignore"):
        if to == np.bool_:
            return np.asarray(x.astype(np.float32) != 0 if x.dtype.kind == "V" else x != 0)
        if to == _E8M0:
            return _to_e8m0(x, bool(saturate), round_mode)
        if saturate and to in _SATURATING:
            fmax = float(ml_dtypes.finfo(to).max)
            wide = x if x.dtype.kind == "f" and x.dtype.itemsize >= 2 else x.astype(np.float32)
            return np.clip(wide, -fmax, fmax).astype(to)
        return x.astype(to)


def _cast_shape(ctx: ShapeContext) -> Any:
    return ctx.input_shape(0), ctx.attr("to")


def _cast_params(op: Any) -> Any:
    return (op.param("saturate", "int", 1, allowed=(0, 1),
                     doc="to float8: clamp out-of-range values to +-max (1) or not (0)")
            .param("round_mode", "str", "up", allowed=ROUND_MODES,
                   doc="to float8 e8m0: how a mantissa rounds the exponent"))


(
    _cast_params(
        define_op("Cast")
        .doc("converts to dtype 'to' (ONNX Cast rules)")
        .input("input", "T1").output("output", "T2")
        .param("to", "dtype", doc="the output dtype"))
    .type_param("T1", ALL + LOWP).type_param("T2", ALL + LOWP)
    .shape_fn(_cast_shape)
    .compute(lambda x, to, saturate, round_mode: cast_array(x, to_numpy_dtype(to), saturate, round_mode))
)

(
    _cast_params(
        define_op("CastLike")
        .doc("converts 'input' to the dtype of 'target_type' (ONNX Cast rules)")
        .input("input", "T1").input("target_type", "T2").output("output", "T2"))
    .type_param("T1", ALL + LOWP).type_param("T2", ALL + LOWP)
    .shape_fn(lambda ctx: (ctx.input_shape(0), ctx.input_dtype(1)))
    .compute(lambda x, target, saturate, round_mode: cast_array(x, target.dtype, saturate, round_mode))
)
