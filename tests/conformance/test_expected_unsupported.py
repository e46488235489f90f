"""The conformance harness holds refused cases to the committed list (expected_unsupported.py):
an UnsupportedOpError for a case not on it fails, and a listed case that passes fails too (so
the list only shrinks, and a case that converts cannot quietly stop converting again)."""

from __future__ import annotations

import pytest

from . import harness
from .expected_unsupported import EXPECTED_UNSUPPORTED
from .harness import NODE, REAL, Outcome, case_names, run_case

LISTED = sorted(EXPECTED_UNSUPPORTED)[0]


@pytest.fixture
def raw(monkeypatch: pytest.MonkeyPatch):
    """Make the unchecked run of every case return the given outcome."""

    def set_outcome(out: Outcome) -> None:
        monkeypatch.setattr(harness, "run_case_unchecked", lambda kind, name: out)

    return set_outcome


def test_unlisted_unsupported_case_fails(raw) -> None:
    raw(Outcome("unsupported", "- Relu (opset 14): no mapping registered"))
    out = run_case(NODE, "test_relu")
    assert out.status == "failed"
    assert "newly unsupported" in out.detail and "expected_unsupported.py" in out.detail
    assert "Relu" in out.detail


def test_listed_unsupported_case_skips_with_its_reason(raw) -> None:
    raw(Outcome("unsupported", "whatever the pre-flight says"))
    out = run_case(NODE, LISTED)
    assert out == Outcome("skipped", f"expected unsupported: {EXPECTED_UNSUPPORTED[LISTED]}")


def test_listed_case_that_passes_fails_until_removed(raw) -> None:
    raw(Outcome("passed"))
    out = run_case(NODE, LISTED)
    assert out.status == "failed" and "remove its entry" in out.detail


@pytest.mark.parametrize("status", ["passed", "failed", "skipped"])
def test_unlisted_outcomes_are_unchanged(raw, status: str) -> None:
    raw(Outcome(status, "detail"))
    assert run_case(NODE, "test_relu") == Outcome(status, "detail")


def test_every_entry_names_a_suite_case_with_a_reason() -> None:
    known = set(case_names(NODE)) | set(case_names(REAL))
    assert not sorted(set(EXPECTED_UNSUPPORTED) - known)
    assert all(reason.strip() for reason in EXPECTED_UNSUPPORTED.values())
