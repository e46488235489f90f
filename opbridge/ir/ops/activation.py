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


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise, in f64 (numpy has none; math.erf is exact to 1 ulp)."""
    flat = x.astype(np.float64).ravel().tolist()
    return np.fromiter(map(math.erf, flat), np.float64, len(flat)).reshape(x.shape)


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


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return (0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))).astype(x.dtype)


(
    define_op("Relu")
    .doc("max(x, 0)")
    .input("x", "T").output("y", "T")
    .type_param("T", NUMERIC)
    .shape_fn(same_shape)
    .compute(lambda x: np.maximum(x, np.zeros((), x.dtype)))
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
