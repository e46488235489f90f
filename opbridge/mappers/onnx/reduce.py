"""ONNX mappings: reduce ops (owned by the op-family engineers)."""

from __future__ import annotations
