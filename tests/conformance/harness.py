"""Running the official ONNX backend tests (``onnx.backend.test.BackendTest``) through opbridge.

Each case is one method of a unittest class the ONNX runner builds; we call it directly and
classify the outcome: passed, failed, skipped by the skip table, or skipped because the
pre-flight found an op (or a case of an op) opbridge does not support yet, which must then be
on the committed list of expected-unsupported cases (expected_unsupported.py, with reasons).
"""

from __future__ import annotations

import os
import tempfile
import unittest
import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any

from opbridge.backend import OpbridgeBackend, OpbridgeRep
from opbridge.errors import UnsupportedOpError

from ..graph_equality import assert_roundtrip
from .expected_unsupported import EXPECTED_UNSUPPORTED
from .skips import skip_reason

_LIST = "tests/conformance/expected_unsupported.py"

#: The runner's class of node tests and of the real-model tests (light models, offline).
NODE, REAL = "OnnxBackendNodeModelTest", "OnnxBackendRealModelTest"

#: Whether the round-trip check also compiles both graphs and compares the programs.
ROUNDTRIP_COMPILE = True


@dataclass(frozen=True)
class Outcome:
    """What one case did: ``status`` is passed, failed, skipped or (unchecked runs only)
    unsupported; ``detail`` says why."""

    status: str
    detail: str = ""


class _RecordingBackend(OpbridgeBackend):
    """The backend, keeping the reps it prepares so that a case's graphs can be checked after
    it ran (every converted graph must come back equal from a ``.obir`` file)."""

    reps: list[OpbridgeRep] = []

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> OpbridgeRep:
        rep = super().prepare(model, device, **kwargs)
        cls.reps.append(rep)
        return rep


def _roundtrip_failure() -> str | None:
    """Why a graph of the case just run does not survive save -> load, or None."""
    try:
        for rep in _RecordingBackend.reps:
            for g in rep.graphs:
                assert_roundtrip(g, compile=ROUNDTRIP_COMPILE)
    except AssertionError as err:
        return "save -> load: " + " ".join(str(err).split())[:400]
    finally:
        _RecordingBackend.reps.clear()
    return None


@cache
def _test_classes() -> dict[str, type[unittest.TestCase]]:
    import onnx.backend.test

    # the real-model tests write their dummy data under ONNX_HOME: keep it out of ~
    os.environ.setdefault("ONNX_HOME", tempfile.mkdtemp(prefix="opbridge-onnx-home-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators overflow casts on purpose
        return dict(onnx.backend.test.BackendTest(_RecordingBackend, __name__).test_cases)


def case_names(kind: str) -> list[str]:
    """The CPU test names of one kind (NODE or REAL), e.g. ``test_abs``."""
    cls = _test_classes()[kind]
    return sorted(m[: -len("_cpu")] for m in dir(cls) if m.startswith("test_") and m.endswith("_cpu"))


def run_case(kind: str, name: str) -> Outcome:
    """Run one case (``name`` without the device suffix) and classify the result, holding an
    "unsupported" outcome to the committed list (expected_unsupported.py): a case refused that
    is not on it fails (a mapping that starts refusing a case is a loss, not a skip), and a
    listed case that now passes fails too, until its entry goes (else it could regress unseen)."""
    out = run_case_unchecked(kind, name)
    listed = EXPECTED_UNSUPPORTED.get(name)
    if out.status == "unsupported":
        if listed is None:
            return Outcome("failed", f"newly unsupported (not in {_LIST}): {out.detail}")
        return Outcome("skipped", f"expected unsupported: {listed}")
    if listed is not None and out.status == "passed":
        return Outcome("failed", f"passes now: remove its entry from {_LIST} ({listed})")
    return out


def run_case_unchecked(kind: str, name: str) -> Outcome:
    """Run one case and classify the result: passed, failed, skipped (skip table or runner),
    or unsupported (the pre-flight refused an op or a case of one; ``detail`` says which)."""
    reason = skip_reason(name)
    if reason is not None:
        return Outcome("skipped", f"skip table: {reason}")
    cls = _test_classes()[kind]
    method = f"{name}_cpu"
    test = cls(method)
    _RecordingBackend.reps.clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            getattr(test, method)()
    except unittest.SkipTest as err:
        return Outcome("skipped", f"runner: {err}")
    except UnsupportedOpError as err:
        return Outcome("unsupported", str(err.message).strip().splitlines()[-1].strip())
    except AssertionError as err:
        return Outcome("failed", "wrong result: " + " ".join(str(err).split())[:400])
    except Exception as err:
        return Outcome("failed", f"{type(err).__name__}: " + " ".join(str(err).split())[:400])
    failure = _roundtrip_failure()
    return Outcome("failed", failure) if failure else Outcome("passed")
