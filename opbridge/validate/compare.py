"""Tensor comparison: the metrics validation uses to decide whether two tensors agree.

Metrics, computed in float64 over the positions where both tensors are finite:

- cosine similarity ``a·b / (‖a‖ ‖b‖)``;
- Euclidean similarity ``1 − ‖a − b‖ / ‖(a + b) / 2‖``, as TPU-MLIR's ``npz_tool compare``
  defines it (1 for equal tensors, falling as the difference grows relative to their mean);
- the largest absolute error ``max |a − b|``;
- the largest relative error ``max |a − b| / max(|a|, |b|)`` (0 where both are 0), which is
  bounded by 2 and so stays readable where the reference is near zero;
- SQNR in dB, ``10 log10(Σ a² / Σ (a − b)²)`` with ``a`` the reference (``inf`` when equal).

A comparison passes when the tensors are equal, or within ``rtol``/``atol`` everywhere
(``np.allclose``), or both similarities reach the tolerance. NaN and ±inf must sit at the same
positions (with the same sign) in both tensors; a shape or dtype mismatch fails on its own.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..errors import OpbridgeError


@dataclass(frozen=True)
class Tolerance:
    """When two tensors count as the same: similarity floors, and an allclose shortcut."""

    cosine: float = 0.99
    euclid: float = 0.99
    rtol: float = 1e-4
    atol: float = 1e-5
    #: Only exact equality passes (indices, masks, integer shapes).
    exact: bool = False

    def __post_init__(self) -> None:
        for name in ("cosine", "euclid"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and -1.0 <= v <= 1.0):
                raise ToleranceError(
                    f"tolerance {name} = {v!r}: must be a number in [-1, 1]",
                    hint="give it as '0.99,0.99' (cosine, Euclidean)",
                )


class ToleranceError(OpbridgeError, ValueError):
    """A tolerance given by the user is malformed."""


#: Defaults per dtype: f32/f64 as TPU-MLIR compares float models (0.99, 0.99); lower
#: precisions get a looser Euclidean floor because their rounding error is larger; integers
#: other than 8-bit (indices, shapes) and bool must be equal.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "f64": Tolerance(0.99, 0.99, rtol=1e-7, atol=1e-9),
    "f32": Tolerance(0.99, 0.99, rtol=1e-4, atol=1e-5),
    "f16": Tolerance(0.99, 0.95, rtol=1e-2, atol=1e-3),
    "bf16": Tolerance(0.99, 0.90, rtol=2e-2, atol=1e-2),
    "i8": Tolerance(0.99, 0.90, rtol=0.0, atol=1.0),
    "u8": Tolerance(0.99, 0.90, rtol=0.0, atol=1.0),
}
_EXACT = Tolerance(1.0, 1.0, rtol=0.0, atol=0.0, exact=True)


def default_tolerance(dtype: str) -> Tolerance:
    """The tolerance used for a tensor of IR dtype ``dtype`` when none is given."""
    return DEFAULT_TOLERANCES.get(dtype, _EXACT)


def parse_tolerance(text: str | tuple[float, float] | Tolerance | None) -> tuple[float, float] | None:
    """``"0.99,0.99"`` or a pair -> ``(cosine, euclid)``; None stays None (per-dtype defaults)."""
    if text is None:
        return None
    if isinstance(text, Tolerance):
        return (text.cosine, text.euclid)
    if isinstance(text, str):
        parts = [p.strip() for p in text.split(",")]
        try:
            vals = tuple(float(p) for p in parts)
        except ValueError:
            raise ToleranceError(
                f"tolerance '{text}': not two numbers", hint="write it as '0.99,0.99' (cosine, Euclidean)"
            ) from None
    else:
        try:
            vals = tuple(float(v) for v in text)
        except (TypeError, ValueError):
            raise ToleranceError(
                f"tolerance {text!r}: not a pair of numbers", hint="pass (cosine, euclid), e.g. (0.99, 0.99)"
            ) from None
    if len(vals) != 2:
        raise ToleranceError(
            f"tolerance {text!r}: {len(vals)} numbers, want 2", hint="write it as '0.99,0.99' (cosine, Euclidean)"
        )
    Tolerance(vals[0], vals[1])  # range check
    return (vals[0], vals[1])


def tolerance_for(dtype: str, override: tuple[float, float] | None) -> Tolerance:
    """The per-dtype default, with the user's (cosine, euclid) floors applied to non-exact dtypes."""
    base = default_tolerance(dtype)
    if override is None or base.exact:
        return base
    return Tolerance(override[0], override[1], rtol=base.rtol, atol=base.atol)


@dataclass
class CompareResult:
    """The outcome of comparing a candidate tensor with a reference tensor."""

    #: ``equal``, ``close`` (allclose), ``similar``, ``different``, ``shape``, ``dtype``,
    #: ``nonfinite`` (NaN/inf positions differ)
    status: str
    passed: bool
    cosine: float = math.nan
    euclid: float = math.nan
    max_abs: float = math.nan
    max_rel: float = math.nan
    sqnr_db: float = math.nan
    #: what differs, in words ("" when it passed)
    reason: str = ""
    ref_shape: tuple[int, ...] = ()
    cand_shape: tuple[int, ...] = ()
    ref_dtype: str = ""
    cand_dtype: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = None if math.isnan(v) else ("inf" if v > 0 else "-inf")
            elif isinstance(v, tuple):
                d[k] = list(v)
        return d


def _dtype_name(a: np.ndarray) -> str:
    from ..ir.types import from_numpy_dtype

    try:
        return from_numpy_dtype(a.dtype)
    except OpbridgeError:
        return str(a.dtype)


def metrics(ref: np.ndarray, cand: np.ndarray) -> dict[str, float]:
    """cosine, euclid, max_abs, max_rel, sqnr_db of two same-shaped arrays (finite values only)."""
    a = np.asarray(ref, dtype=np.float64).ravel()
    b = np.asarray(cand, dtype=np.float64).ravel()
    keep = np.isfinite(a) & np.isfinite(b)
    if not keep.all():
        a, b = a[keep], b[keep]
    if a.size == 0:
        return {"cosine": 1.0, "euclid": 1.0, "max_abs": 0.0, "max_rel": 0.0, "sqnr_db": math.inf}
    diff = a - b
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    nd = float(np.linalg.norm(diff))
    if na == 0.0 and nb == 0.0:
        cosine = 1.0
    elif na == 0.0 or nb == 0.0:
        cosine = 0.0
    else:
        cosine = float(np.clip(np.dot(a, b) / (na * nb), -1.0, 1.0))
    mean_norm = float(np.linalg.norm((a + b) / 2.0))
    if mean_norm == 0.0:
        euclid = 1.0 if nd == 0.0 else -math.inf
    else:
        euclid = 1.0 - nd / mean_norm
    absdiff = np.abs(diff)
    denom = np.maximum(np.abs(a), np.abs(b))
    rel = np.divide(absdiff, denom, out=np.zeros_like(absdiff), where=denom > 0)
    signal = float(np.dot(a, a))
    noise = float(np.dot(diff, diff))
    if noise == 0.0:
        sqnr = math.inf
    elif signal == 0.0:
        sqnr = -math.inf
    else:
        sqnr = 10.0 * math.log10(signal / noise)
    return {
        "cosine": cosine,
        "euclid": euclid,
        "max_abs": float(absdiff.max()),
        "max_rel": float(rel.max()),
        "sqnr_db": sqnr,
    }


def _nonfinite_mismatch(a: np.ndarray, b: np.ndarray) -> str:
    """Words for NaN/inf positions that differ between reference ``a`` and candidate ``b``."""
    if a.dtype.kind not in "fc" and b.dtype.kind not in "fc":
        return ""
    af, bf = np.asarray(a, np.float64), np.asarray(b, np.float64)
    an, bn = np.isnan(af), np.isnan(bf)
    parts = []
    if (an != bn).any():
        only_b, only_a = int((bn & ~an).sum()), int((an & ~bn).sum())
        if only_b:
            parts.append(f"candidate has NaN at {only_b} position(s) where the reference has none")
        if only_a:
            parts.append(f"reference has NaN at {only_a} position(s) where the candidate has none")
    ai, bi = np.isinf(af), np.isinf(bf)
    inf_diff = (ai | bi) & ~(an | bn) & ~((ai & bi) & (np.sign(af) == np.sign(bf)))
    if inf_diff.any():
        parts.append(f"±inf differs at {int(inf_diff.sum())} position(s)")
    return "; ".join(parts)


def compare(
    ref: Any,
    cand: Any,
    tolerance: Tolerance | tuple[float, float] | None = None,
) -> CompareResult:
    """Compare ``cand`` with the reference ``ref``; see the module docstring for the rules.

    ``tolerance``: a :class:`Tolerance`, a ``(cosine, euclid)`` pair applied over the dtype's
    defaults, or None for the defaults of the reference's dtype.
    """
    a, b = np.asarray(ref), np.asarray(cand)
    rd, cd = _dtype_name(a), _dtype_name(b)
    # numpy has no bfloat16 of its own (ml_dtypes' is of kind 'V'): compare its values as the
    # floats they are, or every difference of one rounding would read as "must be equal"
    a, b = (x.astype(np.float32) if name == "bf16" else x for x, name in ((a, rd), (b, cd)))
    base = dict(ref_shape=tuple(a.shape), cand_shape=tuple(b.shape), ref_dtype=rd, cand_dtype=cd)
    if isinstance(tolerance, Tolerance):
        tol = tolerance
    else:
        tol = tolerance_for(rd, parse_tolerance(tolerance))
    if a.shape != b.shape:
        return CompareResult(
            "shape", False, reason=f"shape {list(b.shape)} where the reference has {list(a.shape)}", **base
        )
    m = metrics(a, b) if (a.dtype.kind in "fciub" and b.dtype.kind in "fciub") else {}
    if rd != cd:
        return CompareResult(
            "dtype", False, reason=f"dtype {cd} where the reference has {rd}", **base, **m
        )
    nonfinite = _nonfinite_mismatch(a, b)
    if nonfinite:
        return CompareResult("nonfinite", False, reason=nonfinite, **base, **m)
    if np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
        return CompareResult("equal", True, **base, **m)
    if tol.exact or not m:
        n = int((a != b).sum())
        return CompareResult(
            "different", False, reason=f"values differ at {n} of {a.size} position(s) (must be equal)",
            **base, **m,
        )
    af, bf = a.astype(np.float64), b.astype(np.float64)
    if np.allclose(bf, af, rtol=tol.rtol, atol=tol.atol, equal_nan=True):
        return CompareResult("close", True, **base, **m)
    if m["cosine"] >= tol.cosine and m["euclid"] >= tol.euclid:
        return CompareResult("similar", True, **base, **m)
    fails = []
    if m["cosine"] < tol.cosine:
        fails.append(f"cosine {m['cosine']:.6f} < {tol.cosine}")
    if m["euclid"] < tol.euclid:
        fails.append(f"euclid {m['euclid']:.6f} < {tol.euclid}")
    reason = "values: " + ", ".join(fails) + f" (max abs error {m['max_abs']:.4g})"
    return CompareResult("different", False, reason=reason, **base, **m)

