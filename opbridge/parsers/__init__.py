"""Parsers: read model files into an OriginGraph. They know file formats, not the IR."""

from __future__ import annotations

from .origin import Framework, OriginGraph, OriginNode, TensorInfo

__all__ = ["Framework", "OriginGraph", "OriginNode", "TensorInfo"]
