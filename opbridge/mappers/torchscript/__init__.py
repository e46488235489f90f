"""The built-in TorchScript mappings (owned by the TorchScript frontend)."""

from __future__ import annotations
