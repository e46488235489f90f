"""Shared fixtures and skips."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Real models written by others (read-only); absent on a user's fresh clone.
SHARED_MODELS = ROOT.parent / "shared" / "models"

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None
HAVE_CV2 = importlib.util.find_spec("cv2") is not None

requires_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (optional extra)")
requires_ort = pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed (extra 'validate')")
requires_cv2 = pytest.mark.skipif(
    not HAVE_CV2, reason="opencv-python-headless<5 is not installed (extra 'test')"
)
requires_shared_models = pytest.mark.skipif(
    not SHARED_MODELS.is_dir(), reason=f"{SHARED_MODELS} is absent (a fresh clone has no shared/)"
)
