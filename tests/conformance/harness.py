"""Running the official ONNX backend tests (``onnx.backend.test.BackendTest``) through opbridge.

Each case is one method of a unittest class the ONNX runner builds; we call it directly and
classify the outcome: passed, failed, skipped by the skip table, or skipped because the
pre-flight found an op (or a case of an op) opbridge does not support yet.
"""

from __future__ import annotations

import os
import tempfile
import unittest
import warnings
from dataclasses import dataclass
from functools import cache

from opbridge.backend import OpbridgeBackend
from opbridge.errors import UnsupportedOpError

from .skips import skip_reason

#: The runner's class of node tests and of the real-model tests (light models, offline).
NODE, REAL = "OnnxBackendNodeModelTest", "OnnxBackendRealModelTest"


@dataclass(frozen=True)
class Outcome:
    """What one case did: ``status`` is passed, failed or skipped; ``detail`` says why."""

    status: str
    detail: str = ""


@cache
def _test_classes() -> dict[str, type[unittest.TestCase]]:
    import onnx.backend.test

    # the real-model tests write their dummy data under ONNX_HOME: keep it out of ~
    os.environ.setdefault("ONNX_HOME", tempfile.mkdtemp(prefix="opbridge-onnx-home-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators overflow casts on purpose
        return dict(onnx.backend.test.BackendTest(OpbridgeBackend, __name__).test_cases)


def case_names(kind: str) -> list[str]:
    """The CPU test names of one kind (NODE or REAL), e.g. ``test_abs``."""
    cls = _test_classes()[kind]
    return sorted(m[: -len("_cpu")] for m in dir(cls) if m.startswith("test_") and m.endswith("_cpu"))


def run_case(kind: str, name: str) -> Outcome:
    """Run one case (``name`` without the device suffix) and classify the result."""
    reason = skip_reason(name)
    if reason is not None:
        return Outcome("skipped", f"skip table: {reason}")
    cls = _test_classes()[kind]
    method = f"{name}_cpu"
    test = cls(method)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            getattr(test, method)()
    except unittest.SkipTest as err:
        return Outcome("skipped", f"runner: {err}")
    except UnsupportedOpError as err:
        return Outcome("skipped", "unsupported: " + str(err.message).strip().splitlines()[-1].strip())
    except AssertionError as err:
        return Outcome("failed", "wrong result: " + " ".join(str(err).split())[:400])
    except Exception as err:
        return Outcome("failed", f"{type(err).__name__}: " + " ".join(str(err).split())[:400])
    return Outcome("passed")
