"""opbridge: convert trained models into one typed IR, and run it on a simulated TPU.

The public API; see DESIGN.md ("The public API") and the README.
"""

from __future__ import annotations

from .batch import batch
from .convert import convert
from .errors import (
    AttrError,
    GraphError,
    InterpretError,
    MappingError,
    ModelFormatError,
    OpbridgeError,
    PluginError,
    RegistryError,
    ShapeError,
    SimulatorError,
    UnsupportedOpError,
)
from .export import export_torchscript
from .ir import (
    DEFAULT_OPS,
    DTYPES,
    Graph,
    GraphBuilder,
    Node,
    OpDef,
    Origin,
    ShapeContext,
    Value,
    define_op,
    format_graph,
    interpret,
    load,
    save,
)
from .ir.passes import register_pass
from .mappers import (
    DEFAULT_MAPPINGS,
    Framework,
    ImplyType,
    MapContext,
    OriginNode,
    imply_type_of,
    mapping,
    register_custom_op,
)
from .plugins_loader import load_plugins
from .simulator import Program, Target, compile, load_program, register_kernel  # noqa: A004
from .validate import validate

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_OPS", "DTYPES", "AttrError", "Graph", "GraphBuilder", "GraphError", "InterpretError",
    "MappingError", "ModelFormatError", "Node", "OpDef", "OpbridgeError", "Origin", "PluginError", "RegistryError",
    "ShapeContext", "ShapeError", "SimulatorError", "UnsupportedOpError", "Value", "__version__",
    "define_op", "export_torchscript", "format_graph", "interpret", "load", "save",
    "DEFAULT_MAPPINGS", "Framework", "ImplyType", "MapContext", "OriginNode", "convert",
    "imply_type_of", "load_plugins", "mapping", "register_custom_op",
    "register_pass",
    "Program", "Target", "compile", "load_program", "register_kernel", "validate", "batch",
]
