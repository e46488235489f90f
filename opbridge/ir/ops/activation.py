"""Activation functions (ONNX semantics, names and defaults).

Float kernels take f16/bf16 inputs through f32 (numpy has no bf16 math and f16 math loses
precision in intermediates) and cast the result back to the input's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op
from ..types import to_numpy_dtype
from ..vecops import relu
from .common import FLOATS, INTS, NUMERIC, same_shape

_PRELU_TYPES = FLOATS + ("i32", "i64", "u32", "u64")
_SHRINK_TYPES = ("f32", "f16", "f64") + INTS
_NARROW = (to_numpy_dtype("f16"), to_numpy_dtype("bf16"))


def widen(x: np.ndarray) -> np.ndarray:
    """``x`` as a dtype numpy can compute in: f16/bf16 become f32, others stay."""
    if x.dtype in _NARROW:
        return x.astype(np.float32)
    return x


def via_f32(fn: Callable[..., Any]) -> Callable[..., np.ndarray]:
    """A unary compute: runs ``fn`` on ``widen(x)`` (no fp warnings), returns x's dtype."""

    def compute(x: np.ndarray, **params: Any) -> np.ndarray:
        with np.errstate(all="ignore"):  # overflow to inf and nan outside the domain are expected
            return np.asarray(fn(widen(x), **params)).astype(x.dtype, copy=False)

    compute.__doc__ = fn.__doc__
    return compute


# f64: W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp.
# 23 (1969) 631-638: the coefficient sets of netlib specfun's CALERF, good to about 1e-16
# relative (what math.erf gives).
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
          3.20937758913846947e03, 1.85777706184603153e-1)
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
          2.84423683343917062e03)
_ERF_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
          2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
          2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)
_ERF_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
          1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
          3.43936767414372164e03, 1.23033935480374942e03)
_ERF_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
          1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_ERF_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1,
          6.05183413124413191e-2, 2.33520497626869185e-3)


def _ratio(t: np.ndarray, num: tuple[float, ...], den: tuple[float, ...]) -> np.ndarray:
    """Cody's ``(((num[-1] t + num[0]) t + num[1]) t ...) + num[-2]`` over the same for den."""
    xnum = num[-1] * t
    xden = t.copy()
    for a, b in zip(num[:-2], den[:-1]):
        xnum += a
        xnum *= t
        xden += b
        xden *= t
    return (xnum + num[-2]) / (xden + den[-1])


def _exp_neg_sq(y: np.ndarray) -> np.ndarray:
    """exp(-y*y), with y split at 1/16 so the square loses no digits (as CALERF does)."""
    ysq = np.trunc(y * y.dtype.type(16.0)) / y.dtype.type(16.0)
    return np.exp(-ysq * ysq) * np.exp(-(y - ysq) * (y + ysq))


#: Elements per block of :func:`erf` and GELU: their twenty-odd passes then run in cache.
BLOCK = 32768


def blockwise(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """``fn`` (elementwise, same dtype out) applied to ``x`` block by block of :data:`BLOCK`."""
    if x.size <= BLOCK:
        return fn(x)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    for i in range(0, flat.size, BLOCK):
        out[i:i + BLOCK] = fn(flat[i:i + BLOCK])
    return out.reshape(x.shape)


# f32: the rational approximation Eigen, XLA and TVM use for float erf (x * P(x^2) / Q(x^2) on
# x clamped to [-4, 4], where erf is 1 to f32 precision): a few ulp, no exp.
_ERF32_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
            -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
            -1.60960333262415e-02)
_ERF32_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
            -7.37332916720468e-03, -1.42647390514189e-02)


def _horner(t: np.ndarray, coeffs: tuple[float, ...]) -> np.ndarray:
    acc = np.full_like(t, coeffs[0])
    for c in coeffs[1:]:
        acc *= t
        acc += t.dtype.type(c)
    return acc


def _erf32_block(x: np.ndarray) -> np.ndarray:
    c = np.clip(x, np.float32(-4.0), np.float32(4.0))  # nan stays nan
    t = c * c
    p = _horner(t, _ERF32_P)
    p *= c
    p /= _horner(t, _ERF32_Q)
    return p


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise (numpy has none): f32 (and narrower floats, through
    f32) by Eigen's rational approximation, else in f64 by Cody's; block by block of
    :data:`BLOCK` elements so that their passes run in cache."""
    if x.dtype in (np.float32, np.float16) or x.dtype.name == "bfloat16":
        return blockwise(_erf32_block, np.asarray(x, np.float32))
    return blockwise(_erf_block, np.asarray(x, np.float64))


def _erf_block(xf: np.ndarray) -> np.ndarray:
    """Cody's erf in f64: each range evaluated over the whole block (on ``|x|`` clipped into
    it) and the right one picked by ``np.where``: contiguous passes, no gather or scatter."""
    y = np.abs(xf)
    lo, hi = 0.46875, 4.0
    with np.errstate(under="ignore"):  # erfc and tiny squares underflow to 0, as they should
        ys = np.minimum(y, lo)
        small = ys * _ratio(ys * ys, _ERF_A, _ERF_B)
        ym = np.clip(y, lo, hi)
        erfc = _exp_neg_sq(ym) * _ratio(ym, _ERF_C, _ERF_D)
        yb = np.clip(y, hi, 27.0)  # erfc is 0 beyond 26.5; the clip keeps 1/y^2 finite
        inv = 1.0 / (yb * yb)
        big = _exp_neg_sq(yb) * (0.5641895835477562869 - inv * _ratio(inv, _ERF_P, _ERF_Q)) / yb
    erfc = np.where(y > hi, big, erfc)
    np.subtract(1.0, erfc, out=erfc)
    out = np.copysign(np.where(y <= lo, small, erfc), xf, out=erfc)
    return np.where(np.isnan(xf), xf, out)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp(-x) overflows to inf for very negative x, and 1/(1+inf) is the right limit 0
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(np.zeros((), x.dtype), x)


def _check_alpha_nonzero(ctx: ShapeContext) -> Any:
    if ctx.attr("alpha") == 0.0:
        raise ctx.error("must not be 0 (Celu divides by alpha)", attr="alpha",
                        hint="use alpha=1.0, the ONNX default")
    return ctx.same_as_input(0)


def _prelu_shape(ctx: ShapeContext) -> Any:
    x, slope = ctx.input_shape(0), ctx.input_shape(1)
    fits = len(slope) <= len(x) and all(
        s in (1, d) for s, d in zip(reversed(slope), reversed(x)))
    if not fits:
        raise ctx.error(
            f"slope shape {list(slope)} does not broadcast to x shape {list(x)} (unidirectionally)",
            hint="give slope a shape such as [C, 1, 1] for per-channel slopes of an NCHW input",
        )
    return ctx.same_as_input(0)


def _prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        y = np.where(x < 0, widen(x) * widen(slope), widen(x))
    return y.astype(x.dtype)


def _clip(x: np.ndarray, min: float, max: float) -> np.ndarray:  # noqa: A002 - ONNX names
    """min/max are float params; for integer inputs they are rounded inward and saturated."""
    lo: Any
    hi: Any
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        lo = x.dtype.type(info.min if min <= info.min else (info.max if min > info.max else math.ceil(min)))
        hi = x.dtype.type(info.max if max >= info.max else (info.min if max < info.min else math.floor(max)))
        # ONNX: when min > max every value becomes max
        return np.minimum(np.maximum(x, lo), hi)
    w = widen(x)
    return np.minimum(np.maximum(w, w.dtype.type(min)), w.dtype.type(max)).astype(x.dtype)


def _shrink(x: np.ndarray, lambd: float, bias: float) -> np.ndarray:
    w = x.astype(np.float64) if x.dtype.kind in "iu" else widen(x)
    y = np.where(w < -lambd, w + bias, np.where(w > lambd, w - bias, 0))
    return y.astype(x.dtype)


def _gelu_erf_block(x: np.ndarray) -> np.ndarray:
    y = (_erf32_block if x.dtype == np.float32 else _erf_block)(x * x.dtype.type(math.sqrt(0.5)))
    y += 1.0
    y *= x
    y *= 0.5
    return y


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    if x.dtype in (np.float32, np.float64):
        return blockwise(_gelu_erf_block, x)
    return (0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))).astype(x.dtype)


(
    define_op("Relu")
    .doc("max(x, 0)")
    .input("x", "T").output("y", "T")
    .type_param("T", NUMERIC)
    .shape_fn(same_shape)
    .compute(lambda x: relu(x))
)

(
    define_op("LeakyRelu")
    .doc("x if x >= 0 else alpha * x")
    .input("x", "T").output("y", "T")
    .param("alpha", "float", default=0.01, doc="slope for x < 0")
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(lambda x, alpha: np.where(x < 0, x * x.dtype.type(alpha), x)))
)

(
    define_op("PRelu")
    .doc("x if x >= 0 else slope * x; slope broadcasts (unidirectionally, numpy rules) to x")
    .input("x", "T").input("slope", "T").output("y", "T")
    .type_param("T", _PRELU_TYPES)
    .shape_fn(_prelu_shape)
    .compute(_prelu)
)

(
    define_op("Sigmoid")
    .doc("1 / (1 + exp(-x))")
    .input("x", "T").output("y", "T")
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(_sigmoid))
)

(
    define_op("HardSigmoid")
    .doc("max(0, min(1, alpha * x + beta))")
    .input("x", "T").output("y", "T")
    .param("alpha", "float", default=0.2).param("beta", "float", default=0.5)
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(lambda x, alpha, beta: np.clip(x * x.dtype.type(alpha) + x.dtype.type(beta), 0, 1)))
)

(
    define_op("HardSwish")
    .doc("x * max(0, min(1, x / 6 + 0.5))")
    .input("x", "T").output("y", "T")
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(lambda x: x * np.clip(x * x.dtype.type(1.0 / 6.0) + x.dtype.type(0.5), 0, 1)))
)

(
    define_op("Tanh")
    .doc("tanh(x)")
    .input("input", "T").output("output", "T")
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(np.tanh))
)

(
    define_op("Elu")
    .doc("x if x >= 0 else alpha * (exp(x) - 1)")
    .input("x", "T").output("y", "T")
    .param("alpha", "float", default=1.0)
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(lambda x, alpha: np.where(x < 0, x.dtype.type(alpha) * np.expm1(x), x)))
)

(
    define_op("Selu")
    .doc("gamma * (x if x > 0 else alpha * (exp(x) - 1))")
    .input("x", "T").output("y", "T")
    .param("alpha", "float", default=1.6732632423543772848170429916717)
    .param("gamma", "float", default=1.0507009873554804934193349852946)
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(lambda x, alpha, gamma: x.dtype.type(gamma) * np.where(
        x > 0, x, x.dtype.type(alpha) * np.expm1(x))))
)

(
    define_op("Celu")
    .doc("max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); alpha must not be 0")
    .input("x", "T").output("y", "T")
    .param("alpha", "float", default=1.0)
    .type_param("T", FLOATS)
    .shape_fn(_check_alpha_nonzero)
    .compute(via_f32(lambda x, alpha: np.maximum(x, 0) + np.minimum(
        0, x.dtype.type(alpha) * np.expm1(x / x.dtype.type(alpha)))))
)

(
    define_op("Gelu")
    .doc("x * Phi(x) (approximate='none', with erf) or its tanh approximation (approximate='tanh')")
    .input("x", "T").output("y", "T")
    .param("approximate", "str", default="none", allowed=("none", "tanh"))
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(_gelu))
)

(
    define_op("Mish")
    .doc("x * tanh(softplus(x))")
    .input("x", "T").output("y", "T")
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(lambda x: x * np.tanh(_softplus(x))))
)

(
    define_op("Softplus")
    .doc("log(1 + exp(x)), computed without overflow")
    .input("x", "T").output("y", "T")
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(_softplus))
)

(
    define_op("Softsign")
    .doc("x / (1 + |x|)")
    .input("input", "T").output("output", "T")
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(lambda x: x / (1 + np.abs(x))))
)

(
    define_op("ThresholdedRelu")
    .doc("x if x > alpha else 0")
    .input("x", "T").output("y", "T")
    .param("alpha", "float", default=1.0)
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(lambda x, alpha: np.where(x > x.dtype.type(alpha), x, 0)))
)

(
    define_op("Swish")
    .doc("x * sigmoid(alpha * x) (SiLU when alpha = 1)")
    .input("x", "T").output("y", "T")
    .param("alpha", "float", default=1.0)
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(via_f32(lambda x, alpha: x * _sigmoid(x * x.dtype.type(alpha))))
)

(
    define_op("Clip")
    .doc("min(max(input, min), max); min/max are attributes (ONNX >= 11 has them as inputs); "
         "when min > max every value becomes max")
    .input("input", "T").output("output", "T")
    .param("min", "float", default=-math.inf, doc="lower bound; -inf for none")
    .param("max", "float", default=math.inf, doc="upper bound; +inf for none")
    .type_param("T", NUMERIC)
    .shape_fn(same_shape)
    .compute(_clip)
)

(
    define_op("Shrink")
    .doc("input + bias if input < -lambd, input - bias if input > lambd, else 0")
    .input("input", "T").output("output", "T")
    .param("bias", "float", default=0.0).param("lambd", "float", default=0.5)
    .type_param("T", _SHRINK_TYPES)
    .shape_fn(same_shape)
    .compute(_shrink)
)
