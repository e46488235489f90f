"""opbridge: convert trained models into one typed IR, and run it on a simulated TPU.

The public API; see DESIGN.md ("The public API") and the README.

Every public name is imported on first use (PEP 562), so ``import opbridge`` and
``opbridge --help`` cost no more than the interpreter's start: a command that converts an
ONNX model never imports the Caffe parser, the simulator or the web server, and the op
definitions and mappings themselves load per family when first looked up (see
:mod:`opbridge.registry_index`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import keep_functions, lazy_getattr

__version__ = "0.1.0"

#: Public name -> the module it lives in (relative to this package).
_LAZY: dict[str, str] = {
    **dict.fromkeys(("AttrError", "GraphError", "InterpretError", "MappingError", "ModelFormatError",
                     "OpbridgeError", "PluginError", "RegistryError", "ShapeError", "SimulatorError",
                     "UnsupportedOpError"), ".errors"),
    **dict.fromkeys(("DEFAULT_OPS", "OpDef", "ShapeContext", "define_op"), ".ir.opdef"),
    **dict.fromkeys(("Graph", "GraphBuilder", "Node", "Origin", "Value"), ".ir.graph"),
    "DTYPES": ".ir.types", "format_graph": ".ir.printer", "interpret": ".ir.interpret",
    "load": ".ir.io", "save": ".ir.io",
    **dict.fromkeys(("DEFAULT_MAPPINGS", "ImplyType", "imply_type_of", "mapping"), ".mappers.registry"),
    "Framework": ".parsers.origin", "OriginNode": ".parsers.origin", "MapContext": ".mappers.context",
    "register_custom_op": ".mappers.custom_op", "register_pass": ".ir.passes",
    "calibrate": ".quant", "quantize": ".quant", "CalibrationTable": ".quant",
    "convert": ".convert", "batch": ".batch", "validate": ".validate",
    "export_torchscript": ".export", "load_plugins": ".plugins_loader",
    "random_weights": ".tools.random_weights",
    **dict.fromkeys(("Program", "Target", "compile", "load_program", "register_kernel"), ".simulator"),
}

__getattr__ = lazy_getattr(__name__, _LAZY)
keep_functions(__name__, frozenset({"convert", "batch", "validate"}))


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # the names, for type checkers and readers; at run time __getattr__ imports them
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
    from .quant import CalibrationTable, calibrate, quantize
    from .simulator import Program, Target, compile, load_program, register_kernel  # noqa: A004
    from .tools.random_weights import random_weights
    from .validate import validate

__all__ = [
    "DEFAULT_OPS", "DTYPES", "AttrError", "Graph", "GraphBuilder", "GraphError", "InterpretError",
    "MappingError", "ModelFormatError", "Node", "OpDef", "OpbridgeError", "Origin", "PluginError", "RegistryError",
    "ShapeContext", "ShapeError", "SimulatorError", "UnsupportedOpError", "Value", "__version__",
    "define_op", "export_torchscript", "format_graph", "interpret", "load", "save",
    "DEFAULT_MAPPINGS", "Framework", "ImplyType", "MapContext", "OriginNode", "convert",
    "imply_type_of", "load_plugins", "mapping", "register_custom_op",
    "register_pass", "CalibrationTable", "calibrate", "quantize",
    "Program", "Target", "compile", "load_program", "register_kernel", "validate", "batch",
    "random_weights",
]
