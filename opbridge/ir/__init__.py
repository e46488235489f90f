"""The IR core: types, values, nodes, graphs, op definitions, verifier, interpreter, files.

The names below are imported on first use; the built-in op definitions register per family
when an op is first looked up (see :mod:`opbridge.registry_index`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import keep_functions, lazy_getattr

_LAZY: dict[str, str] = {
    **dict.fromkeys(("Graph", "GraphBuilder", "Node", "Origin", "Value"), ".graph"),
    **dict.fromkeys(("DEFAULT_OPS", "OpDef", "OpRegistry", "ShapeContext", "define_op", "get_op"), ".opdef"),
    "QuantParams": ".quantparams", "interpret": ".interpret", "load": ".io", "save": ".io", "format_graph": ".printer", "DTYPES": ".types",
}


__getattr__ = lazy_getattr(__name__, _LAZY)
keep_functions(__name__, frozenset({"interpret"}))  # the function, not the module interpret.py


if TYPE_CHECKING:
    from .graph import Graph, GraphBuilder, Node, Origin, Value
    from .interpret import interpret
    from .io import load, save
    from .opdef import DEFAULT_OPS, OpDef, OpRegistry, ShapeContext, define_op, get_op
    from .printer import format_graph
    from .quantparams import QuantParams
    from .types import DTYPES

__all__ = [
    "DEFAULT_OPS", "DTYPES", "Graph", "GraphBuilder", "Node", "OpDef", "OpRegistry", "Origin",
    "QuantParams", "ShapeContext", "Value", "define_op", "format_graph", "get_op", "interpret", "load", "save",
]
