"""Comparison metrics against numbers derived by hand (or by plain-Python formulas written here)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from opbridge.validate.compare import (
    Tolerance,
    ToleranceError,
    compare,
    default_tolerance,
    parse_tolerance,
)

# (ref, cand, cosine, euclid, max_abs, max_rel, sqnr_db), each derived on paper:
HAND = {
    # a·b = 0; ‖a−b‖ = √2, ‖(a+b)/2‖ = √0.5 -> 1 − 2 = −1; SQNR = 10·log10(1/2)
    "orthogonal": ([1.0, 0.0], [0.0, 1.0], 0.0, -1.0, 1.0, 1.0, -3.0102999566),
    # b = 2a: cos 1; ‖a−b‖ = 3, ‖(a+b)/2‖ = 4.5 -> 1/3; rel |1−2|/2 = 0.5; SQNR 10·log10(9/9)
    "scaled_x2": ([1.0, 2.0, 2.0], [2.0, 4.0, 4.0], 1.0, 1.0 / 3.0, 2.0, 0.5, 0.0),
    # b = −a: cos −1; mean 0 with a nonzero difference -> −inf; rel 2/1; SQNR 10·log10(2/8)
    "negated": ([1.0, -1.0], [-1.0, 1.0], -1.0, -math.inf, 2.0, 2.0, -6.0205999133),
    # a = 0: cos 0 by convention; ‖a−b‖ = √2, ‖(a+b)/2‖ = √0.5 -> −1; SQNR: no signal -> −inf
    "ref_zero": ([0.0, 0.0], [1.0, 1.0], 0.0, -1.0, 1.0, 1.0, -math.inf),
    # equal: all similarities 1, no error, SQNR +inf
    "equal": ([0.5, -2.0, 3.0], [0.5, -2.0, 3.0], 1.0, 1.0, 0.0, 0.0, math.inf),
    # both zero: equal
    "both_zero": ([0.0, 0.0], [0.0, 0.0], 1.0, 1.0, 0.0, 0.0, math.inf),
}


@pytest.mark.parametrize("case", list(HAND), ids=list(HAND))
def test_metrics_hand_derived(case):
    ref, cand, cos, euc, mabs, mrel, sqnr = HAND[case]
    r = compare(np.array(ref, np.float32), np.array(cand, np.float32))
    assert r.cosine == pytest.approx(cos, abs=1e-9)
    if math.isinf(euc):
        assert r.euclid == euc
    else:
        assert r.euclid == pytest.approx(euc, abs=1e-9)
    assert r.max_abs == pytest.approx(mabs)
    assert r.max_rel == pytest.approx(mrel)
    if math.isinf(sqnr):
        assert r.sqnr_db == sqnr
    else:
        assert r.sqnr_db == pytest.approx(sqnr, abs=1e-6)


def _plain_metrics(a, b):
    """The same formulas written out element by element, independently of compare()."""
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    nd = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    nm = math.sqrt(sum(((x + y) / 2) ** 2 for x, y in zip(a, b)))
    return dot / (na * nb), 1 - nd / nm, 10 * math.log10(sum(x * x for x in a) / (nd * nd))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_random_against_plain_python(seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(50)
    b = a + 0.3 * rng.standard_normal(50)
    cos, euc, sqnr = _plain_metrics(a.tolist(), b.tolist())
    r = compare(a, b)
    assert r.cosine == pytest.approx(cos, rel=1e-12)
    assert r.euclid == pytest.approx(euc, rel=1e-12)
    assert r.sqnr_db == pytest.approx(sqnr, rel=1e-12)
    assert r.max_abs == pytest.approx(max(abs(x - y) for x, y in zip(a, b)))


def test_leaky_alpha_mixup_is_caught_by_euclid_not_cosine():
    # LeakyRelu with alpha 0.1 vs 0.01 on N(0,1): cosine ≈ 0.996 (passes 0.99),
    # Euclidean ≈ 0.91 (fails 0.99) -- why both floors are needed.
    x = np.random.default_rng(0).standard_normal(10000).astype(np.float32)
    r = compare(np.where(x > 0, x, 0.1 * x), np.where(x > 0, x, 0.01 * x))
    assert r.cosine > 0.99
    assert not r.passed and r.status == "different"
    assert "euclid" in r.reason and "cosine" not in r.reason


@pytest.mark.parametrize(
    "ref,cand,status,passed",
    [
        ([1.0, 2.0], [1.0, 2.0], "equal", True),
        ([1.0, 2.0], [1.0 + 1e-6, 2.0], "close", True),
        ([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.02], "similar", True),
        ([1.0, 2.0], [2.0, 1.0], "different", False),
    ],
    ids=["equal", "allclose", "similar", "different"],
)
def test_status(ref, cand, status, passed):
    r = compare(np.array(ref, np.float32), np.array(cand, np.float32))
    assert (r.status, r.passed) == (status, passed)
    assert (r.reason == "") == passed


def test_shape_mismatch_reported_as_such():
    r = compare(np.zeros((1, 4), np.float32), np.zeros((1, 5), np.float32))
    assert (r.status, r.passed) == ("shape", False)
    assert r.reason == "shape [1, 5] where the reference has [1, 4]"


def test_dtype_mismatch_reported_as_such():
    r = compare(np.ones(3, np.float32), np.ones(3, np.float16))
    assert (r.status, r.passed) == ("dtype", False)
    assert r.reason == "dtype f16 where the reference has f32"
    assert r.cosine == pytest.approx(1.0)


@pytest.mark.parametrize(
    "ref,cand,status,needle",
    [
        ([np.nan, 1.0], [np.nan, 1.0], "equal", ""),
        ([np.nan, 1.0], [0.0, 1.0], "nonfinite", "reference has NaN at 1"),
        ([0.0, 1.0], [np.nan, np.nan], "nonfinite", "candidate has NaN at 2"),
        ([np.inf, 1.0], [np.inf, 1.0], "equal", ""),
        ([np.inf, 1.0], [-np.inf, 1.0], "nonfinite", "±inf differs at 1"),
        ([np.inf, 1.0], [5.0, 1.0], "nonfinite", "±inf differs at 1"),
    ],
    ids=["nan=same", "nan=ref-only", "nan=cand-only", "inf=same", "inf=sign", "inf=ref-only"],
)
def test_nonfinite(ref, cand, status, needle):
    r = compare(np.array(ref, np.float32), np.array(cand, np.float32))
    assert r.status == status and r.passed == (status == "equal")
    assert needle in r.reason


def test_nan_positions_excluded_from_metrics():
    r = compare(np.array([np.nan, 3.0, 4.0]), np.array([np.nan, 3.0, 4.04]))
    # over the finite part: ‖a−b‖ = 0.04 only
    assert r.max_abs == pytest.approx(0.04) and r.passed


@pytest.mark.parametrize("dtype", ["i32", "i64", "bool"], ids=lambda d: f"dtype={d}")
def test_integers_and_bool_must_be_equal(dtype):
    a = np.array([1, 0, 1, 1], dtype={"i32": np.int32, "i64": np.int64, "bool": np.bool_}[dtype])
    b = a.copy()
    b[0] = 0
    r = compare(a, b, tolerance=(0.0, -1.0))
    assert not r.passed and "must be equal" in r.reason
    assert compare(a, a.copy()).passed


def test_default_tolerances_per_dtype():
    assert (default_tolerance("f32").cosine, default_tolerance("f32").euclid) == (0.99, 0.99)
    assert default_tolerance("f16").euclid < default_tolerance("f32").euclid
    assert default_tolerance("bf16").euclid <= default_tolerance("f16").euclid
    assert default_tolerance("i64").exact and default_tolerance("bool").exact


def test_f16_rounding_passes_default():
    x = np.random.default_rng(0).standard_normal(1000)
    r = compare(x.astype(np.float16), (x * 1.001).astype(np.float16))
    assert r.passed, r.reason


def test_tolerance_override_tightens():
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    b = np.array([1.0, 2.0, 3.0, 4.02], np.float32)
    assert compare(a, b).passed
    r = compare(a, b, tolerance=(0.9999999, 0.9999))
    assert not r.passed and "cosine" in r.reason and "euclid" in r.reason


@pytest.mark.parametrize(
    "text,want",
    [("0.99,0.95", (0.99, 0.95)), (" 0.9 , 0.8 ", (0.9, 0.8)), ((0.5, 0.5), (0.5, 0.5)), (None, None)],
    ids=["plain", "spaces", "tuple", "absent"],
)
def test_parse_tolerance(text, want):
    assert parse_tolerance(text) == want


@pytest.mark.parametrize("text", ["0.99", "a,b", "0.99,0.99,0.9", "2,0.9"],
                         ids=["one", "nan", "three", "range"])
def test_parse_tolerance_errors(text):
    with pytest.raises(ToleranceError, match="tolerance"):
        parse_tolerance(text)


def test_tolerance_range_checked():
    with pytest.raises(ToleranceError, match="cosine"):
        Tolerance(cosine=1.5)


def test_to_dict_is_json_safe():
    import json

    r = compare(np.array([1.0, -1.0]), np.array([-1.0, 1.0]))
    d = r.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["euclid"] == "-inf" and d["ref_shape"] == [2]
