"""The IR core: types, values, nodes, graphs, op definitions, verifier, interpreter, files."""

from __future__ import annotations

from . import ops  # noqa: F401  (registers the built-in ops)
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
