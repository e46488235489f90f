"""Mappers: the mapping registry and the built-in mappings, per framework and op family.

See the mapping API in DESIGN.md: ``@mapping`` for any subgraph, ``register_custom_op`` for a
one-to-one attribute mapping, :func:`convert_origin_graph` to run them over a parsed model.
"""

from __future__ import annotations

from ..parsers.origin import Framework, OriginGraph, OriginNode
from . import caffe, onnx, torchscript  # noqa: F401  (built-in mappings register on import)
from .context import MapContext
from .converter import convert_origin_graph, preflight
from .custom_op import CustomOpBuilder, DstOp, register_custom_op
from .registry import (
    DEFAULT_MAPPINGS,
    ImplyType,
    MappingEntry,
    MappingError,
    MappingRegistry,
    imply_type_of,
    mapping,
    set_imply_type,
)

__all__ = [
    "DEFAULT_MAPPINGS", "CustomOpBuilder", "DstOp", "Framework", "ImplyType", "MapContext",
    "MappingEntry", "MappingError", "MappingRegistry", "OriginGraph", "OriginNode",
    "convert_origin_graph", "imply_type_of", "mapping", "preflight", "register_custom_op",
    "set_imply_type",
]
