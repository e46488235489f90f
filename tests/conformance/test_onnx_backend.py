"""The official ONNX conformance suite (node tests and real models) through opbridge.backend.

Each case is its own test: it passes, fails, or skips with a reason (the skip table in
skips.py, or its entry in expected_unsupported.py for a case the pre-flight refuses; a refused
case not listed there fails, as does a listed case that passes). ``test_floor``
checks that at least FLOOR node tests and REAL_FLOOR real models pass; floors only go up.

The whole suite runs by default (about 20 s for the 1884 node tests and 20 s for the 9 light
real models on one core). ``OPBRIDGE_CONFORMANCE_SAMPLE=N`` runs every N-th node test only
(the floor is scaled), for quick local iterations.
"""

from __future__ import annotations

import os

import pytest

from .harness import NODE, REAL, Outcome, case_names, run_case

#: Node tests that must pass in a full run (raise it when more pass; never lower it).
FLOOR = 1832
#: Real-model tests (the 9 light models shipped with onnx) that must pass.
REAL_FLOOR = 9

SAMPLE_EVERY = max(int(os.environ.get("OPBRIDGE_CONFORMANCE_SAMPLE", "1") or 1), 1)

_ALL_NODE = case_names(NODE)
_NODE = _ALL_NODE[::SAMPLE_EVERY]
_REAL = case_names(REAL)
_RESULTS: dict[tuple[str, str], Outcome] = {}


def _outcome(kind: str, name: str) -> Outcome:
    key = (kind, name)
    if key not in _RESULTS:
        _RESULTS[key] = run_case(kind, name)
    return _RESULTS[key]


def _check(kind: str, name: str) -> None:
    out = _outcome(kind, name)
    if out.status == "skipped":
        pytest.skip(out.detail)
    if out.status == "failed":
        pytest.fail(out.detail, pytrace=False)


@pytest.mark.parametrize("name", _NODE, ids=[n[len("test_"):] for n in _NODE])
def test_node(name: str) -> None:
    _check(NODE, name)


@pytest.mark.parametrize("name", _REAL, ids=[n[len("test_"):] for n in _REAL])
def test_real_model(name: str) -> None:
    _check(REAL, name)


def test_floor() -> None:
    """At least FLOOR node tests and REAL_FLOOR real models pass (cases not yet run here run now)."""
    node_pass = sum(_outcome(NODE, n).status == "passed" for n in _NODE)
    real_pass = sum(_outcome(REAL, n).status == "passed" for n in _REAL)
    floor = FLOOR if SAMPLE_EVERY == 1 else FLOOR * len(_NODE) // max(len(_ALL_NODE), 1) // 2
    assert node_pass >= floor, f"{node_pass} node tests pass, below the floor of {floor}"
    assert real_pass >= REAL_FLOOR, f"{real_pass} real models pass, below the floor of {REAL_FLOOR}"
