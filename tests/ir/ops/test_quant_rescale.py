"""fixed_point_rescale and Requantize against an independent pure-Python-int reference:
``round_half_away_from_zero(x * m / 2**(31 + s))`` computed with Python ints and Fractions."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from opbridge.ir.ops.quant import fixed_point_rescale, requantize

from .onnx_ref import run_ir, run_onnx_reference

RNG = np.random.default_rng(7)


def _ref(x: int, m: int, s: int) -> int:
    """round_half_away_from_zero(x * m / 2**(31 + s)) in exact rational arithmetic."""
    q = Fraction(x * m) / Fraction(2) ** (31 + s)
    mag = abs(q)
    r = int(mag)  # floor of a non-negative value
    if mag - r >= Fraction(1, 2):
        r += 1
    return -r if q < 0 else r


def _ref_array(x: np.ndarray, m: np.ndarray, s: np.ndarray) -> np.ndarray:
    xb, mb, sb = np.broadcast_arrays(x, m, s)
    out = [_ref(int(a), int(b), int(c)) for a, b, c in zip(xb.ravel(), mb.ravel(), sb.ravel())]
    return np.array(out, dtype=object).reshape(xb.shape)


def _edge_x() -> np.ndarray:
    big = 2**31 - 1
    return np.array([0, 1, -1, 2, -2, 3, -3, big, -big, big - 1, -(big - 1), -(2**31) + 1,
                     2**30, -(2**30), 12345, -12345], np.int64)


@pytest.mark.parametrize("shift", list(range(-20, 41)))
def test_scalar_shift_matches_python_ints(shift: int) -> None:
    x = np.concatenate([_edge_x(), RNG.integers(-(2**31) + 1, 2**31, 200)])
    for m in (0, 1, 2**30, 2**31 - 1, int(RNG.integers(2**30, 2**31))):
        got = fixed_point_rescale(x, m, shift)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got.astype(object), _ref_array(x, np.int64(m), np.int64(shift)))


@pytest.mark.parametrize("n", [1, 2, 5, 31, 40])
def test_negative_ties_round_away_from_zero(n: int) -> None:
    """x * m exactly halfway between two integers after the shift: +-(k + 1/2) -> +-(k + 1)."""
    shift = n - 31
    k = np.arange(0, 50, dtype=np.int64)
    x = (2 * k + 1) << (n - 1)  # x / 2**n = k + 1/2 with m = 1
    x = x[np.abs(x) < 2**31]
    for sign in (1, -1):
        got = fixed_point_rescale(sign * x, 1, shift)
        np.testing.assert_array_equal(got.astype(object), _ref_array(sign * x, np.int64(1), np.int64(shift)))
        np.testing.assert_array_equal(got, sign * (x[: got.size] // (1 << n) + 1))


def test_per_channel_shifts_mixed_with_zero_results() -> None:
    """Per-channel multiplier and shift (some shifts push n past 62, so the result is 0)."""
    x = RNG.integers(-(2**31) + 1, 2**31, (2, 6, 3, 4))
    m = RNG.integers(2**30, 2**31, 6).reshape(1, 6, 1, 1)
    s = np.array([-20, -1, 0, 7, 31, 40]).reshape(1, 6, 1, 1)
    got = fixed_point_rescale(x, m, s)
    np.testing.assert_array_equal(got.astype(object), _ref_array(x, m, s))


def test_left_shifts_exact_below_the_cap() -> None:
    """31 + shift <= 0 (a left shift): exact while |x * m| <= 2**40 and the shift <= 20."""
    x = RNG.integers(-(2**9), 2**9, 100)
    m = RNG.integers(2**30, 2**31, 100)
    for shift in (-31, -35, -51):
        got = fixed_point_rescale(x, m, shift)
        np.testing.assert_array_equal(got.astype(object), _ref_array(x, m, np.int64(shift)))
    # mixing a left-shift channel with right-shift ones
    s = np.array([-40, 3]).reshape(1, 2)
    xx = RNG.integers(-(2**9), 2**9, (5, 2))
    mm = np.array([2**30, 2**31 - 1]).reshape(1, 2)
    np.testing.assert_array_equal(fixed_point_rescale(xx, mm, s).astype(object), _ref_array(xx, mm, s))


@pytest.mark.parametrize("shifts", [[-2, 5, 12, 30], [-20, -10, 0, 3], [-31, 0, 1, 40]],
                         ids=["large", "small", "left-shift"])
def test_int32_input_and_requantize_per_channel(shifts: list[int]) -> None:
    """Requantize takes the i32 accumulator directly: saturate(rescale + zp) per channel (the
    zero point joins the rounding constant when small shifts let it, else is added after)."""
    acc = RNG.integers(-(2**31), 2**31, (1, 4, 5, 5)).astype(np.int32)
    acc[0, 0, 0, :3] = [-(2**31), 2**31 - 1, 0]
    acc[0, 1, 0, :4] = [-(2**10), -3 * 2**9, 2**10, 3 * 2**9]  # ties for small shifts
    m = np.array([2**31 - 1, 2**30, 2**30 + 12345, 2**31 - 2], np.int32)
    s = np.array(shifts, np.int32)
    zp = np.array([-3, 0, 4, 100], np.int8)
    got = requantize(acc, m, s, zp, axis=1, output_dtype="i8")
    ref = _ref_array(acc.astype(np.int64), m.reshape(1, 4, 1, 1).astype(np.int64),
                     s.reshape(1, 4, 1, 1).astype(np.int64))
    want = np.clip(ref + zp.astype(np.int64).reshape(1, 4, 1, 1), -128, 127).astype(np.int8)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, want)
    wide = requantize(acc, m, s, zp.astype(np.int16), axis=1, output_dtype="i16")
    np.testing.assert_array_equal(wide, np.clip(ref + zp.astype(np.int64).reshape(1, 4, 1, 1),
                                                -(2**15), 2**15 - 1).astype(np.int16))


@pytest.mark.parametrize("shift", [-30, -5, 20, 31])
@pytest.mark.parametrize("offset", [0, -7, 32767, -(2**40)])
def test_offset_is_added_after_rounding(shift: int, offset: int) -> None:
    x = np.concatenate([_edge_x(), RNG.integers(-(2**31) + 1, 2**31, 100)])
    got = fixed_point_rescale(x, 2**31 - 1, shift, offset)
    want = _ref_array(x, np.int64(2**31 - 1), np.int64(shift)) + offset
    np.testing.assert_array_equal(got.astype(object), want)


@pytest.mark.parametrize("out", ["u8", "i8", "u16", "i16"])
def test_quantize_linear_ties_and_saturation_match_onnx_reference(out: str) -> None:
    """Round half to even and saturation, per axis, against onnx.reference (finite values
    within int32 after scaling: its own cast to int32 is undefined past that)."""
    dt = {"u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16}[out]
    x = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, 1e6, -1e6, 126.5],
                  [100.0, -100.0, 7.5, -7.5, 0.0, -0.0, 1e6, -1e6, 2.5, -127.5]], np.float32)
    scale = np.array([1.0, 0.5], np.float32)
    zp = np.array([3, 0] if out[0] == "u" else [-2, 5], dt)
    args = [x, scale, zp]
    got = run_ir("QuantizeLinear", args, axis=0, output_dtype=out)[0]
    want = run_onnx_reference("QuantizeLinear", args, axis=0)[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("out", ["u8", "i8", "i16"])
def test_quantize_linear_nan_reads_zero_and_infinities_saturate(out: str) -> None:
    dt = {"u8": np.uint8, "i8": np.int8, "i16": np.int16}[out]
    lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
    x = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, -np.nan], np.float32)
    zp = np.array(7, dt)
    got = run_ir("QuantizeLinear", [x, np.array(0.25, np.float32), zp], output_dtype=out)[0]
    np.testing.assert_array_equal(got, np.array([7, hi, lo, hi, lo, 7], dt))
