"""Post-training quantization: calibration tables, int8 and half-precision graphs.

``calibrate(g, samples, method=...)`` -> :class:`CalibrationTable`; ``quantize(g, table,
dtype="int8")`` -> a QDQ int8 graph (``equalize=True`` on both: cross-layer equalisation
first, :mod:`opbridge.quant.equalize`); ``quantize(g, None, dtype="f16"|"bf16")`` -> a half graph.
See docs/quantization.md for the scheme.
"""

from __future__ import annotations

from .calibrate import calibrate
from .data import IMAGENET, Preprocess, load_samples
from .equalize import equalize
from .quantize import quantize
from .table import CalibrationTable, QuantError, TensorRange

__all__ = ["IMAGENET", "CalibrationTable", "Preprocess", "QuantError", "TensorRange", "calibrate",
           "equalize", "load_samples", "quantize"]
