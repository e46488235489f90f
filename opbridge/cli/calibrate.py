"""``opbridge calibrate`` (defined with ``quantize`` in :mod:`.quant`)."""

from __future__ import annotations

from .quant import add_calibrate_parser as add_parser

__all__ = ["add_parser"]
