"""Mappers: the mapping registry and the built-in mappings, per framework and op family.

See the mapping API in DESIGN.md: ``@mapping`` for any subgraph, ``register_custom_op`` for a
one-to-one attribute mapping, :func:`convert_origin_graph` to run them over a parsed model.

The names below are imported on first use, and the built-in mappings register per family
when first looked up (see :mod:`opbridge.registry_index`): converting an ONNX model loads
neither the Caffe nor the TorchScript mappings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

_LAZY: dict[str, str] = {
    **dict.fromkeys(("Framework", "OriginGraph", "OriginNode"), "..parsers.origin"),
    "MapContext": ".context", "convert_origin_graph": ".converter", "preflight": ".converter",
    **dict.fromkeys(("CustomOpBuilder", "DstOp", "register_custom_op"), ".custom_op"),
    **dict.fromkeys(("DEFAULT_MAPPINGS", "ImplyType", "MappingEntry", "MappingError", "MappingRegistry",
                     "imply_type_of", "mapping", "set_imply_type"), ".registry"),
}


__getattr__ = lazy_getattr(__name__, _LAZY)


if TYPE_CHECKING:
    from ..parsers.origin import Framework, OriginGraph, OriginNode
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
