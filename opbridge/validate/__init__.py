"""Validation: run a model several ways and compare every tensor that can be matched by name.

:mod:`.compare` holds the tensor metrics, :mod:`.report` the per-layer report, :mod:`.inputs`
how inputs are made, :mod:`.runners` the three ways a model runs, :mod:`.api` ``validate``.
"""

from __future__ import annotations

from .api import ValidateError, validate
from .compare import CompareResult, Tolerance, compare, default_tolerance
from .report import Divergence, Report, Row

__all__ = [
    "CompareResult", "Divergence", "Report", "Row", "Tolerance", "ValidateError", "compare",
    "default_tolerance", "validate",
]
