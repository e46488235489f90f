"""The IR core: types, values, nodes, graphs, op definitions, verifier, interpreter, files.

The names below are imported on first use; the built-in op definitions register per family
when an op is first looked up (see :mod:`opbridge.registry_index`).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

_LAZY: dict[str, str] = {
    **dict.fromkeys(("Graph", "GraphBuilder", "Node", "Origin", "Value"), ".graph"),
    **dict.fromkeys(("DEFAULT_OPS", "OpDef", "OpRegistry", "ShapeContext", "define_op", "get_op"), ".opdef"),
    "interpret": ".interpret", "load": ".io", "save": ".io", "format_graph": ".printer", "DTYPES": ".types",
}


def __getattr__(name: str) -> Any:
    home = _LAZY.get(name)
    if home is None:  # a submodule (opbridge.ir.ops, .passes, ...), as eager imports bound them
        if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module 'opbridge.ir' has no attribute {name!r}")
        return importlib.import_module(f".{name}", __name__)
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .graph import Graph, GraphBuilder, Node, Origin, Value
    from .interpret import interpret
    from .io import load, save
    from .opdef import DEFAULT_OPS, OpDef, OpRegistry, ShapeContext, define_op, get_op
    from .printer import format_graph
    from .types import DTYPES

__all__ = [
    "DEFAULT_OPS", "DTYPES", "Graph", "GraphBuilder", "Node", "OpDef", "OpRegistry", "Origin",
    "ShapeContext", "Value", "define_op", "format_graph", "get_op", "interpret", "load", "save",
]
