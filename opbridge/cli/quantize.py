"""``opbridge quantize`` (defined with ``calibrate`` in :mod:`.quant`)."""

from __future__ import annotations

from .quant import add_quantize_parser as add_parser

__all__ = ["add_parser"]
