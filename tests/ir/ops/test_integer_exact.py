"""ConvInteger and MatMulInteger against int64 references written here with np.einsum over
numpy's own sliding windows, on every path the kernels take: float32 sums, float64 sums when
float32 could round (a large K = C * kh * kw), and int64 past float64."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from opbridge.ir.ops import quant
from opbridge.ir.ops.quant import exact_sum_dtype, offset_bound

from .onnx_ref import run_ir

RNG = np.random.default_rng(11)


def _conv_ref(x: np.ndarray, w: np.ndarray, xzp: int, wzp: np.ndarray, group: int,
              strides: list[int], pads: list[int], dilations: list[int]) -> np.ndarray:
    """2-D integer cross-correlation in int64: (x - xzp) zero-padded, windows by
    sliding_window_view, each group by einsum."""
    xi = x.astype(np.int64) - xzp
    wi = w.astype(np.int64) - wzp.astype(np.int64).reshape(-1, 1, 1, 1)
    xi = np.pad(xi, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    kh, kw = w.shape[2:]
    span = ((kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1)
    win = sliding_window_view(xi, span, axis=(2, 3))[:, :, ::strides[0], ::strides[1],
                                                     ::dilations[0], ::dilations[1]]
    cg, mg = x.shape[1] // group, w.shape[0] // group
    outs = [np.einsum("nchwij,mcij->nmhw", win[:, g * cg:(g + 1) * cg], wi[g * mg:(g + 1) * mg])
            for g in range(group)]
    return np.concatenate(outs, axis=1)


CASES: dict[str, dict[str, Any]] = {
    "3x3": dict(x=(2, 6, 9, 8), w=(4, 6, 3, 3), group=1, strides=[1, 1], pads=[1, 1, 1, 1]),
    "strided-dilated": dict(x=(1, 4, 11, 10), w=(6, 2, 3, 2), group=2, strides=[2, 3],
                            pads=[2, 0, 1, 1], dilations=[2, 1]),
    "1x1-stride2": dict(x=(2, 8, 7, 7), w=(5, 8, 1, 1), group=1, strides=[2, 2], pads=[0, 0, 0, 0]),
    "depthwise": dict(x=(2, 5, 10, 9), w=(5, 1, 5, 5), group=5, strides=[1, 1], pads=[2, 2, 2, 2]),
    "depthwise-s2-mult2": dict(x=(1, 3, 12, 11), w=(6, 1, 3, 3), group=3, strides=[2, 2],
                               pads=[1, 0, 0, 1]),
    "large-K": dict(x=(1, 320, 5, 4), w=(3, 320, 3, 3), group=1, strides=[1, 1], pads=[1, 1, 1, 1]),
}


def _operands(case: dict[str, Any], types: str, extreme: bool) -> tuple[list[np.ndarray], int, np.ndarray]:
    tx = np.uint8 if types[0] == "u" else np.int8
    tw = np.uint8 if types[1] == "u" else np.int8
    ix, iw = np.iinfo(tx), np.iinfo(tw)
    if extreme:  # every product at its largest magnitude: the bound is reached
        x = np.full(case["x"], ix.min if tx == np.int8 else ix.max, tx)
        w = np.full(case["w"], iw.min if tw == np.int8 else iw.max, tw)
    else:
        x = RNG.integers(ix.min, ix.max + 1, case["x"]).astype(tx)
        w = RNG.integers(iw.min, iw.max + 1, case["w"]).astype(tw)
    m = case["w"][0]
    xzp = 0 if tx == np.int8 else 3
    wzp = RNG.integers(iw.min, iw.max + 1, m).astype(tw) if tw == np.uint8 else np.zeros(m, tw)
    return [x, w, np.array(xzp, tx), wzp], xzp, wzp


@pytest.mark.parametrize("extreme", [False, True], ids=["random", "extreme"])
@pytest.mark.parametrize("types", ["ii", "uu", "ui"])
@pytest.mark.parametrize("name", list(CASES))
def test_conv_integer_matches_int64_einsum(name: str, types: str, extreme: bool) -> None:
    case = CASES[name]
    args, xzp, wzp = _operands(case, types, extreme)
    attrs = {k: case[k] for k in ("group", "strides", "pads")}
    attrs["dilations"] = case.get("dilations", [1, 1])
    got = run_ir("ConvInteger", args, **attrs)[0]
    assert got.dtype == np.int32
    want = _conv_ref(args[0], args[1], xzp, wzp, **attrs)
    np.testing.assert_array_equal(got.astype(np.int64), want)


def test_the_sum_type_follows_the_bound() -> None:
    """K = C * kh * kw: float32 while 255 * sum|w| <= 2**24, float64 past it, int64 past 2**53."""
    small = np.full(3, 127 * 9 * 6)  # a 3x3 conv over 6 channels, |w| = 127 everywhere
    assert exact_sum_dtype(offset_bound(np.int8), small) == np.float32
    large = np.full(3, 128 * 9 * 320)  # CASES["large-K"] with extreme weights
    assert exact_sum_dtype(offset_bound(np.int8), large) == np.float64
    assert exact_sum_dtype(255, np.array([2**53 // 255 + 1])) == np.int64
    assert exact_sum_dtype(255, np.array([2**24 // 255])) == np.float32
    assert offset_bound(np.uint8, np.array([3])) == 252 and offset_bound(np.int8) == 128
    assert offset_bound(np.uint8, np.array([0, 200])) == 255


@pytest.mark.parametrize("name", ["3x3", "depthwise-s2-mult2", "large-K"])
def test_conv_integer_int64_fallback(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No float type admitted (as for a K past 2**53 / 65025): the int64 path, same bits."""
    monkeypatch.setattr(quant, "_EXACT_FLOATS", ())
    case = CASES[name]
    args, xzp, wzp = _operands(case, "ui", extreme=False)
    attrs = {k: case[k] for k in ("group", "strides", "pads")}
    attrs["dilations"] = case.get("dilations", [1, 1])
    assert exact_sum_dtype(1, np.array([1])) == np.int64
    got = run_ir("ConvInteger", args, **attrs)[0]
    np.testing.assert_array_equal(got.astype(np.int64), _conv_ref(args[0], args[1], xzp, wzp, **attrs))


def _matmul_ref(a: np.ndarray, b: np.ndarray, za: np.ndarray, zb: np.ndarray) -> np.ndarray:
    ai = a.astype(np.int64) - (za.astype(np.int64).reshape(-1, 1) if za.size > 1 else int(za))
    bi = b.astype(np.int64) - zb.astype(np.int64)
    return np.einsum("...ik,...kj->...ij", ai, bi)


@pytest.mark.parametrize("fallback", [False, True], ids=["float", "int64"])
@pytest.mark.parametrize("shapes", [((4, 7), (7, 5)), ((2, 3, 6, 300), (300, 4)),
                                    ((3, 1, 5, 2000), (2, 2000, 3))],
                         ids=["2d", "batched", "broadcast-large-K"])
def test_matmul_integer_matches_int64_einsum(shapes: tuple[tuple[int, ...], tuple[int, ...]],
                                             fallback: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if fallback:
        monkeypatch.setattr(quant, "_EXACT_FLOATS", ())
    sa, sb = shapes
    a = RNG.integers(0, 256, sa).astype(np.uint8)
    a.reshape(-1)[: sa[-1]] = 255  # one row at the extreme
    b = RNG.integers(-128, 128, sb).astype(np.int8)
    b[..., 0] = -128  # one column at the extreme
    za = RNG.integers(0, 256, sa[-2]).astype(np.uint8)
    zb = RNG.integers(-128, 128, sb[-1]).astype(np.int8)
    got = run_ir("MatMulInteger", [a, b, za, zb])[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.astype(np.int64), _matmul_ref(a, b, za, zb))
