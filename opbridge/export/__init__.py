"""Exporters that write other frameworks' models in formats opbridge reads without them."""

from __future__ import annotations

from .torchscript import export_torchscript

__all__ = ["export_torchscript"]
