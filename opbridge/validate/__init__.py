"""Validation: run a model several ways and compare every tensor that can be matched by name.

:mod:`.compare` holds the tensor metrics, :mod:`.report` the per-layer report.
"""

from __future__ import annotations

from .compare import CompareResult, Tolerance, compare, default_tolerance

__all__ = ["CompareResult", "Tolerance", "compare", "default_tolerance"]
