"""Quantization: QuantizeLinear, DequantizeLinear, Requantize, and ``quantize_multiplier``.

QuantizeLinear and DequantizeLinear follow the ONNX spec (per tensor, per axis, or per block
of ``block_size`` along ``axis``; integer targets round half to even and saturate, float8
targets cast with or without ``saturate``, float4 adds the zero point before the cast, as
``onnx.reference`` does). The integer products they surround are ConvInteger (``conv.py``)
and MatMulInteger (``matmul.py``), defined with their float families.

Lut reads a 256-entry table by each 8-bit value (the chip's lookup-table instruction: an
int8 activation whose float form is any element-wise function). QAdd is the chip's integer
element-wise Add of two 8-bit tensors of their own scales (see
:func:`qadd`). Requantize is the chip's fixed-point rescale of an i32 accumulator to i8/u8::

    y = saturate(round_half_away_from_zero(acc * multiplier / 2**(31 + shift)) + y_zero_point)

computed exactly in int64, so the interpreter and the simulator give the same bits.
:func:`quantize_multiplier` turns a real scale into that (multiplier, shift) pair, with the
multiplier in [2**30, 2**31) (gemmlowp's normalisation; shift may be negative for scales of 1
or more).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ..opdef import OpDef, ShapeContext, define_op
from ..types import from_numpy_dtype, to_numpy_dtype
from .common import FLOATS, LOWP

#: Integer quantized types and their saturation ranges (the ONNX spec's).
INT_RANGES: dict[str, tuple[int, int]] = {
    "u8": (0, 255), "i8": (-128, 127), "u16": (0, 65535), "i16": (-32768, 32767),
    "u4": (0, 15), "i4": (-8, 7), "u2": (0, 3), "i2": (-2, 1),
}
#: float8 targets: ``x / y_scale`` cast, saturating (``saturate=1``) or not; no zero point.
FLOAT8 = ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz")
#: float4 target: ``x / y_scale + y_zero_point`` cast (its cast saturates by itself).
FLOAT4 = ("f4e2m1",)
QUANT_TYPES = tuple(INT_RANGES) + FLOAT8 + FLOAT4
#: Inputs of DequantizeLinear whose zero point the spec fixes at zero (it is not read).
_NO_ZERO_POINT = FLOAT8 + FLOAT4 + ("f8e8m0",)
#: Requantize's outputs.
REQUANT_TYPES = ("i8", "u8", "i16", "u16")


# -- scale / zero-point layout ------------------------------------------------------------------
def check_params_shape(ctx: ShapeContext, i: int, name: str, x_shape: tuple[Any, ...]) -> None:
    """Input ``i`` (a scale or zero point) against x: a scalar or [1] (per tensor), [x[axis]]
    (per axis), or x's shape with ceil(x[axis] / block_size) along axis (blocked)."""
    ps = tuple(ctx.input_shape(i))
    rank = len(x_shape)
    block = ctx.attr("block_size")
    if ps in ((), (1,)) and not block:
        return
    axis = ctx.normalize_axis(ctx.attr("axis"), rank)
    dim = x_shape[axis]
    if not block:
        if len(ps) != 1 or (isinstance(dim, int) and ps[0] != dim):
            raise ctx.error(f"'{name}' has shape {list(ps)}; per axis {axis} it must be [{dim}]",
                            attr="axis", hint="give one value per entry of x along axis, or a scalar")
        return
    want = list(x_shape)
    if isinstance(dim, int):
        want[axis] = -(-dim // block)
    if len(ps) != rank or any(isinstance(w, int) and p != w for p, w in zip(ps, want)):
        raise ctx.error(f"'{name}' has shape {list(ps)}; with block_size {block} along axis {axis} "
                        f"it must be {want}", attr="block_size",
                        hint="give one scale (and zero point) per block along the axis")


def broadcast_params(p: np.ndarray, shape: tuple[int, ...], axis: int, block_size: int) -> np.ndarray:
    """A scale or zero point made to broadcast against a tensor of ``shape`` (the layouts of
    :func:`check_params_shape`): blocks are repeated and cut to the tensor's length."""
    if p.ndim == 0 or (p.size == 1 and not block_size):
        return p.reshape(())
    axis %= len(shape)
    if not block_size:
        dims = [1] * len(shape)
        dims[axis] = p.size
        return p.reshape(dims)
    return np.repeat(p, block_size, axis=axis).take(range(shape[axis]), axis=axis)


def _layout(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """A scale's or zero point's shape, with [1] read as a scalar (both mean per tensor)."""
    return () if tuple(shape) == (1,) else tuple(shape)


# -- QuantizeLinear ------------------------------------------------------------------------------
def _quantize_shape(ctx: ShapeContext) -> Any:
    xs = tuple(ctx.input_shape(0))
    out = ctx.attr("output_dtype")
    check_params_shape(ctx, 1, "y_scale", xs)
    if ctx.has_input(2):
        check_params_shape(ctx, 2, "y_zero_point", xs)
        if ctx.input_dtype(2) != out:
            raise ctx.error(f"is {out} but y_zero_point is {ctx.input_dtype(2)}; they must agree",
                            attr="output_dtype",
                            hint="give y_zero_point the output dtype (or set output_dtype to its dtype)")
        if _layout(ctx.input_shape(2)) != _layout(ctx.input_shape(1)):
            raise ctx.error(f"y_zero_point has shape {list(ctx.input_shape(2))}, y_scale "
                            f"{list(ctx.input_shape(1))}; they must agree",
                            hint="give y_zero_point the shape of y_scale")
    return xs, out


def quantize_linear(x: np.ndarray, y_scale: np.ndarray, y_zero_point: np.ndarray | None = None, *,
                    axis: int, block_size: int, saturate: int, output_dtype: str,
                    precision: str | None = None) -> np.ndarray:
    """ONNX QuantizeLinear (the spec's formula; onnx.reference's order of operations)."""
    to = to_numpy_dtype(output_dtype)
    scale = broadcast_params(y_scale, x.shape, axis, block_size)
    if precision is not None:
        pdt = to_numpy_dtype(precision)
        ratio = x.astype(pdt) / scale.astype(pdt)
    else:
        ratio = x / scale
    zp = None if y_zero_point is None else broadcast_params(y_zero_point, x.shape, axis, block_size)
    with np.errstate(all="ignore"):
        if output_dtype in INT_RANGES:
            lo, hi = INT_RANGES[output_dtype]
            q = np.array(ratio, np.float64)  # a fresh buffer, rounded and clipped in place
            np.rint(q, out=q)
            nan = np.isnan(q)
            if nan.any():  # NaN reads as 0; +-inf saturate in the clip
                q[nan] = 0.0
            if zp is not None:
                q += zp.astype(np.float64)
            return np.clip(q, lo, hi, out=q).astype(to)
        if output_dtype in FLOAT8:
            if saturate:
                fmax = float(ml_dtypes.finfo(to).max)
                return np.clip(ratio.astype(np.float32), -fmax, fmax).astype(to)
            return ratio.astype(to)
        if zp is not None:
            ratio = ratio + zp.astype(ratio.dtype)
        return ratio.astype(to)


def _scale_layout(op: OpDef) -> OpDef:
    """The params that say how a scale and zero point lay over the tensor (per tensor, per
    ``axis``, or per block of ``block_size`` along it), the same in QuantizeLinear and
    DequantizeLinear (checked by :func:`check_params_shape`)."""
    return (op.param("axis", "int", default=1, doc="the axis of a per-axis or blocked scale")
            .param("block_size", "int", default=0, minimum=0,
                   doc="block length along axis; 0 = not blocked"))


(
    _scale_layout(
        define_op("QuantizeLinear")
        .doc("y = saturate(round_half_even(x / y_scale) + y_zero_point), per tensor, per axis or "
             "per block (ONNX QuantizeLinear); to float8 x / y_scale is cast, to float4 it adds "
             "y_zero_point")
        .input("x", "T1").input("y_scale", "TS").input("y_zero_point", "T2", optional=True)
        .output("y", "T2"))
    .param("saturate", "int", default=1, allowed=(0, 1),
           doc="to float8: clamp out-of-range values to +-max (1) or not (0)")
    .param("output_dtype", "dtype", default="u8", allowed=QUANT_TYPES,
           doc="the quantized type; y_zero_point's when given")
    .param("precision", "dtype", default=None, allowed=FLOATS,
           doc="the type x / y_scale is computed in; absent = numpy's type of the pair")
    .type_param("T1", FLOATS + ("i32",)).type_param("TS", FLOATS + ("i32",))
    .type_param("T2", QUANT_TYPES)
    .shape_fn(_quantize_shape)
    .compute(quantize_linear)
)


# -- DequantizeLinear ----------------------------------------------------------------------------
def _dequantize_shape(ctx: ShapeContext) -> Any:
    xs = tuple(ctx.input_shape(0))
    check_params_shape(ctx, 1, "x_scale", xs)
    if ctx.has_input(2):
        check_params_shape(ctx, 2, "x_zero_point", xs)
        if ctx.input_dtype(2) != ctx.input_dtype(0):
            raise ctx.error(f"x_zero_point is {ctx.input_dtype(2)} but x is {ctx.input_dtype(0)}; "
                            f"they must agree",
                            hint="give x_zero_point the dtype of x")
    return xs, ctx.input_dtype(1)


def dequantize_linear(x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray | None = None, *,
                      axis: int, block_size: int) -> np.ndarray:
    """ONNX DequantizeLinear: (x - x_zero_point) * x_scale in f32, as the scale's type. A
    float8 or float4 input's zero point is zero by the spec and not read."""
    if x_zero_point is not None and from_numpy_dtype(x.dtype) not in _NO_ZERO_POINT:
        zp = broadcast_params(x_zero_point, x.shape, axis, block_size)
        dx = (x.astype(np.int64) - zp.astype(np.int64)).astype(np.float32)
    else:
        dx = x.astype(np.float32)
    scale = broadcast_params(x_scale, x.shape, axis, block_size).astype(np.float32)
    return (dx * scale).astype(x_scale.dtype)


(
    _scale_layout(
        define_op("DequantizeLinear")
        .doc("y = (x - x_zero_point) * x_scale, per tensor, per axis or per block (ONNX "
             "DequantizeLinear); the output has x_scale's type")
        .input("x", "T1").input("x_scale", "T2").input("x_zero_point", "T1", optional=True)
        .output("y", "T2"))
    .type_param("T1", QUANT_TYPES + ("i32",) + tuple(d for d in LOWP if d not in QUANT_TYPES))
    .type_param("T2", FLOATS)
    .shape_fn(_dequantize_shape)
    .compute(dequantize_linear)
)


# -- Requantize ----------------------------------------------------------------------------------
def quantize_multiplier(real_scale: Any) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) i32 arrays with ``real_scale ~= multiplier / 2**(31 + shift)`` and the
    multiplier in [2**30, 2**31) (a zero scale gives multiplier 0, shift 0). Scales must be
    finite and >= 0; the multiplier is the scale's mantissa rounded to 31 bits."""
    s = np.asarray(real_scale, dtype=np.float64)
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"quantize_multiplier: scales must be finite and >= 0, got {s.ravel()[:4]}")
    mant, exp = np.frexp(s)  # s = mant * 2**exp, mant in [0.5, 1)
    m = np.rint(mant * (1 << 31)).astype(np.int64)
    carry = m == (1 << 31)  # the mantissa rounded up to 1.0
    m = np.where(carry, m >> 1, m)
    exp = np.where(carry, exp + 1, exp)
    shift = np.where(s == 0, 0, -exp)
    return m.astype(np.int32), shift.astype(np.int32)


def fixed_point_rescale(x: np.ndarray, multiplier: Any, shift: Any, offset: Any = None) -> np.ndarray:
    """``round_half_away_from_zero(x * multiplier / 2**(31 + shift)) + offset`` in int64, for
    integer ``x`` with ``|x| < 2**31`` and ``multiplier < 2**31`` (so the product stays below
    2**62). A left shift (``31 + shift <= 0``) caps the magnitude at 2**40 first and shifts by
    at most 20: every caller saturates the result to 16 bits or fewer, which such a value
    passes anyway. ``multiplier``, ``shift`` and the integer ``offset`` (absent = 0, e.g. a
    zero point) are scalars or arrays that broadcast against ``x`` (per channel)."""
    m = np.asarray(multiplier, np.int64)
    n = 31 + np.asarray(shift, np.int64)
    if n.size and n.max() > 62:  # |x * m| < 2**62 <= 2**(n-1): rounds to 0, as 0 >> 62 does
        m = np.where(n > 62, 0, m)
        n = np.minimum(n, 62)
    prod = np.asarray(np.multiply(x, m, dtype=np.int64))
    shape = np.broadcast_shapes(prod.shape, n.shape, np.shape(offset))
    if shape != prod.shape:  # a shift or offset wider than x * multiplier
        prod = np.array(np.broadcast_to(prod, shape))
    if n.size and n.min() < 1:
        prod = _rescale_any_shift(prod, n)
        if offset is not None:
            prod += np.asarray(offset, np.int64)
        return prod
    # Right shifts only. With h = 2**(n-1), rounding half away from zero is (p + h) >> n for
    # p >= 0 and -((h - p) >> n) = (p + h - 1) >> n for p < 0 (the arithmetic shift floors:
    # -floor((h - p) / 2**n) = ceil((p - h) / 2**n) = floor((p - h + 2**n - 1) / 2**n)).
    # An offset o joins the constant as o * 2**n where that cannot overflow: the shift of
    # p + h - 1 + o * 2**n is the shift of p + h - 1, plus o. No overflow: |p| < 2**62 and
    # the constant is at most 2**62 in magnitude.
    neg = np.less(prod, 0)
    const = np.left_shift(np.int64(1), n - 1)
    off = None if offset is None else np.asarray(offset, np.int64)
    if off is not None and np.all(np.abs(off) * np.exp2(n) + np.exp2(n - 1) <= 2.0**62):
        const = const + (off << n)
        off = None
    prod += const
    prod -= neg
    prod >>= n
    if off is not None:
        prod += off
    return prod


def _rescale_any_shift(prod: np.ndarray, n: np.ndarray) -> np.ndarray:
    """:func:`fixed_point_rescale` of the product ``prod`` where some ``n = 31 + shift`` is
    below 1 (a left shift): each branch computed for all elements and picked per element (a
    scale of 2**30 or more: rare)."""
    mag = np.abs(prod)
    right = np.maximum(n, 1)  # n <= 62 here
    down = (mag + (np.int64(1) << (right - 1))) >> right
    up = np.minimum(mag, np.int64(1) << 40) << np.clip(-n, 0, 20)
    return np.where(prod < 0, -1, 1) * np.where(n >= 1, down, up)


def _requantize_shape(ctx: ShapeContext) -> Any:
    xs = tuple(ctx.input_shape(0))
    axis = ctx.attr("axis")
    for i, name in ((1, "multiplier"), (2, "shift"), (3, "y_zero_point")):
        if not ctx.has_input(i):
            continue
        ps = tuple(ctx.input_shape(i))
        if ps in ((), (1,)):
            continue
        ax = ctx.normalize_axis(axis, len(xs))
        if len(ps) != 1 or (isinstance(xs[ax], int) and ps[0] != xs[ax]):
            raise ctx.error(f"'{name}' has shape {list(ps)}; give a scalar or one per entry of "
                            f"axis {ax} ({xs[ax]})", attr="axis",
                            hint="give a scalar, or one value per entry of the axis")
    if ctx.has_input(3) and ctx.input_dtype(3) != ctx.attr("output_dtype"):
        raise ctx.error(f"is {ctx.attr('output_dtype')} but y_zero_point is {ctx.input_dtype(3)}",
                        attr="output_dtype",
                        hint="give y_zero_point the output dtype")
    return xs, ctx.attr("output_dtype")


def requantize(acc: np.ndarray, multiplier: np.ndarray, shift: np.ndarray,
               y_zero_point: np.ndarray | None = None, *, axis: int, output_dtype: str) -> np.ndarray:
    """saturate(round_half_away_from_zero(acc * multiplier / 2**(31 + shift)) + y_zero_point),
    exact in int64: |acc| < 2**31 and multiplier < 2**31, so the product stays below 2**62."""
    lo, hi = INT_RANGES[output_dtype]

    def per(p: np.ndarray) -> np.ndarray:
        return broadcast_params(p.astype(np.int64), acc.shape, axis, 0)

    zp = None if y_zero_point is None else per(y_zero_point)
    q = fixed_point_rescale(acc, per(multiplier), per(shift), zp)
    # saturated and narrowed in one pass (the cast of a clipped value is exact)
    return np.clip(q, lo, hi, out=np.empty(q.shape, to_numpy_dtype(output_dtype)), casting="unsafe")


(
    define_op("Requantize")
    .doc("y = saturate(round_half_away_from_zero(acc * multiplier / 2**(31 + shift)) + "
         "y_zero_point): the fixed-point rescale of an i32 accumulator, exact in int64; "
         "multiplier/shift per tensor or per entry of 'axis'")
    .input("acc", "i32").input("multiplier", "i32").input("shift", "i32")
    .input("y_zero_point", "T", optional=True).output("y", "T")
    .param("axis", "int", default=1, doc="the axis of a per-channel multiplier and shift")
    .param("output_dtype", "dtype", default="i8", allowed=REQUANT_TYPES, doc="the output type")
    .type_param("T", REQUANT_TYPES)
    .shape_fn(_requantize_shape)
    .compute(requantize)
)


# -- exact integer products in floating point ---------------------------------------------------
#: The float types an integer product sum may run in, narrowest first, with the largest
#: magnitude up to which each holds every integer (2**p for a p-bit significand).
_EXACT_FLOATS = ((np.dtype(np.float32), 2**24), (np.dtype(np.float64), 2**53))


def offset_bound(dtype: Any, zero_point: Any = None) -> int:
    """The largest ``|v - zero_point|`` over every ``v`` of the integer ``dtype`` (and every
    entry of a per-row/per-channel ``zero_point``; absent = 0)."""
    info = np.iinfo(dtype)
    zp = np.zeros(1, np.int64) if zero_point is None else np.asarray(zero_point, np.int64).ravel()
    return int(max(info.max - zp.min(), zp.max() - info.min))


def exact_sum_dtype(x_bound: int, w_abs_sums: np.ndarray) -> np.dtype:
    """The type in which sums of integer products ``x_k * w_k`` come out exact: float32 or
    float64 (BLAS speed), else int64.

    Every output is ``sum_k x_k * w_k`` with ``|x_k| <= x_bound`` and, for its output
    channel / column, ``sum_k |w_k|`` an entry of ``w_abs_sums``. Any partial sum over a
    subset of the terms, in any order or blocking (a GEMM's, with or without FMA), is an
    integer of magnitude at most ``B = x_bound * max(w_abs_sums)``, and so is every single
    product. A float type with a p-bit significand represents every integer of magnitude
    up to 2**p, so each product and each addition is exact (no rounding ever happens) when
    ``B <= 2**p``: 2**24 for float32, 2**53 for float64. For 8-bit operands ``x_bound <= 255``
    and ``|w_k| <= 255``, so ``B <= 65025 * K`` with ``K = C/group * kh * kw`` (or the
    matmul's inner length): float64 is exact for every ``K < 2**53 / 65025 ~ 1.4e11``, and the
    int64 fallback (exact to 2**63) only takes larger sums."""
    bound = x_bound * int(np.max(w_abs_sums, initial=0))
    return next((dt for dt, limit in _EXACT_FLOATS if bound <= limit), np.dtype(np.int64))


# -- QAdd ----------------------------------------------------------------------------------------
def qadd_params(a_scale: float, b_scale: float, y_scale: float,
                lshift: int = 20) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """QAdd's (multipliers, shifts) for inputs of scales ``a_scale``, ``b_scale`` and an output of
    ``y_scale``: each input to the common scale ``2 * max(a_scale, b_scale) / 2**lshift`` (a
    ratio of at most 1/2, so its shift is a right shift), the sum from there to ``y_scale``
    (TFLite's ADD, and TPU-MLIR's lowering of a quantized Add: ``AddLowering::LoweringQuantized``
    in ``lib/Conversion/TopToTpu/BM1684X/Add.cpp``)."""
    common = 2.0 * max(a_scale, b_scale)
    m, s = quantize_multiplier(np.array([a_scale / common, b_scale / common,
                                         common / (2.0 ** lshift * y_scale)], np.float64))
    return (int(m[0]), int(m[1]), int(m[2])), (int(s[0]), int(s[1]), int(s[2]))


def _qadd_shape(ctx: ShapeContext) -> Any:
    a, b = tuple(ctx.input_shape(0)), tuple(ctx.input_shape(1))
    if a != b:
        raise ctx.error(f"inputs have shapes {list(a)} and {list(b)}; QAdd takes two of one shape",
                        hint="QAdd adds two tensors of one shape: broadcast them first")
    shifts = ctx.attr("shifts")
    if any(int(s) < 0 for s in shifts[:2]):
        raise ctx.error(f"shifts {list(shifts)}: an input's rescale must be by less than 1 "
                        f"(shift >= 0)", attr="shifts", hint="use qadd_params() to compute them")
    return a, ctx.attr("output_dtype")


def qadd(a: np.ndarray, b: np.ndarray, *, a_zero_point: int, b_zero_point: int, y_zero_point: int,
         multipliers: tuple[int, ...], shifts: tuple[int, ...], lshift: int, relu: int,
         output_dtype: str) -> np.ndarray:
    """``y = saturate(R(R((a - za) * 2**lshift, ma, sa) + R((b - zb) * 2**lshift, mb, sb),
    my, sy) + zy)``, R the fixed-point rescale of :func:`fixed_point_rescale`; with ``relu``
    y is at least ``zy`` (the real value's ReLU). Exact in int64: ``|a - za| < 2**9`` and
    ``lshift <= 20`` put the shifted input below 2**29; an input's rescale is by less than 1
    (its shift >= 0), so their sum is below 2**30 and its product with ``my`` below 2**61."""
    lo, hi = INT_RANGES[output_dtype]
    ta = fixed_point_rescale((a.astype(np.int64) - a_zero_point) << lshift, multipliers[0], shifts[0])
    tb = fixed_point_rescale((b.astype(np.int64) - b_zero_point) << lshift, multipliers[1], shifts[1])
    q = fixed_point_rescale(ta + tb, multipliers[2], shifts[2]) + y_zero_point
    if relu:
        q = np.maximum(q, y_zero_point)
    return np.clip(q, lo, hi).astype(to_numpy_dtype(output_dtype))


(
    define_op("QAdd")
    .doc("y = saturate(rescale(rescale((a - a_zp) << lshift) + rescale((b - b_zp) << lshift)) + "
         "y_zp), each rescale a fixed-point multiplier and right shift: two 8-bit tensors of "
         "their own scales added at a common one in int32 and requantized (the chip's int8 "
         "Add); relu=1 keeps y >= y_zp")
    .input("a", "T1").input("b", "T2").output("y", "T3")
    .param("a_zero_point", "int", default=0, minimum=-128, maximum=255)
    .param("b_zero_point", "int", default=0, minimum=-128, maximum=255)
    .param("y_zero_point", "int", default=0, minimum=-128, maximum=255)
    .param("multipliers", "ints", length=3, doc="a's, b's and the sum's fixed-point multiplier")
    .param("shifts", "ints", length=3, doc="their shifts: value * multiplier / 2**(31 + shift)")
    .param("lshift", "int", default=20, minimum=0, maximum=20,
           doc="the left shift of each input before its rescale (the sum's resolution)")
    .param("relu", "int", default=0, allowed=(0, 1), doc="1: a ReLU on the result")
    .param("output_dtype", "dtype", default="i8", allowed=("i8", "u8"), doc="the output type")
    .type_param("T1", ("i8", "u8")).type_param("T2", ("i8", "u8")).type_param("T3", ("i8", "u8"))
    .shape_fn(_qadd_shape)
    .compute(qadd)
)


# -- Lut -----------------------------------------------------------------------------------------
def _lut_shape(ctx: ShapeContext) -> Any:
    if tuple(ctx.input_shape(1)) != (256,):
        raise ctx.error(f"table has shape {list(ctx.input_shape(1))}; it must be [256]",
                        hint="give one entry per 8-bit value, entry i for the value whose byte is i")
    return tuple(ctx.input_shape(0)), ctx.input_dtype(1)


def lut(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``table[byte(x)]``: entry i for the 8-bit value whose two's-complement byte is i (so
    i8 -1 reads entry 255, u8 255 too)."""
    return table[x.astype(np.int64) & 0xFF]


(
    define_op("Lut")
    .doc("y = table[byte(x)]: a 256-entry table read by each 8-bit value (entry i for the value "
         "whose byte is i: i8 -1 reads entry 255), the chip's lookup-table instruction")
    .input("x", "T1").input("table", "T2").output("y", "T2")
    .type_param("T1", ("i8", "u8")).type_param("T2", ("i8", "u8"))
    .shape_fn(_lut_shape)
    .compute(lut)
)
