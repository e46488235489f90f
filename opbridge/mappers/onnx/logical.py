"""ONNX mappings: logical ops (owned by the op-family engineers)."""

from __future__ import annotations
