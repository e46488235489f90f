"""The conformance harness holds refused cases to the committed list (expected_unsupported.py):
an UnsupportedOpError for a case not on it fails, and a listed case that passes fails too (so
the list only shrinks, and a case that converts cannot quietly stop converting again)."""

from __future__ import annotations

import pytest

from . import harness
from .expected_unsupported import EXPECTED_UNSUPPORTED
from .harness import NODE, REAL, Outcome, case_names, run_case

#: a case the tests of the mechanism put on the list (the real list may be empty: every
#: official node test converts)
LISTED = "test_relu"


@pytest.fixture
def raw(monkeypatch: pytest.MonkeyPatch):
    """Make the unchecked run of every case return the given outcome."""

    def set_outcome(out: Outcome) -> None:
        monkeypatch.setattr(harness, "run_case_unchecked", lambda kind, name: out)

    return set_outcome


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(EXPECTED_UNSUPPORTED, LISTED, "Relu: a reason for the test")
    return LISTED


def test_unlisted_unsupported_case_fails(raw) -> None:
    assert "test_relu" not in EXPECTED_UNSUPPORTED
    raw(Outcome("unsupported", "- Relu (opset 14): no mapping registered"))
    out = run_case(NODE, "test_relu")
    assert out.status == "failed"
    assert "newly unsupported" in out.detail and "expected_unsupported.py" in out.detail
    assert "Relu" in out.detail


def test_listed_unsupported_case_skips_with_its_reason(raw, listed) -> None:
    raw(Outcome("unsupported", "whatever the pre-flight says"))
    out = run_case(NODE, listed)
    assert out == Outcome("skipped", "expected unsupported: Relu: a reason for the test")


def test_listed_case_that_passes_fails_until_removed(raw, listed) -> None:
    raw(Outcome("passed"))
    out = run_case(NODE, listed)
    assert out.status == "failed" and "remove its entry" in out.detail


@pytest.mark.parametrize("status", ["passed", "failed", "skipped"])
def test_unlisted_outcomes_are_unchanged(raw, status: str) -> None:
    raw(Outcome(status, "detail"))
    assert run_case(NODE, "test_relu") == Outcome(status, "detail")


def test_every_entry_names_a_suite_case_with_a_reason() -> None:
    known = set(case_names(NODE)) | set(case_names(REAL))
    assert not sorted(set(EXPECTED_UNSUPPORTED) - known)
    assert all(reason.strip() for reason in EXPECTED_UNSUPPORTED.values())
