"""opbridge: convert trained models into one typed IR, and run it on a simulated TPU.

The public API; see DESIGN.md ("The public API") and the README.

Every public name is imported on first use (PEP 562), so ``import opbridge`` and
``opbridge --help`` cost no more than the interpreter's start: a command that converts an
ONNX model never imports the Caffe parser, the simulator or the web server, and the op
definitions and mappings themselves load per family when first looked up (see
:mod:`opbridge.registry_index`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any

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
    "convert": ".convert", "batch": ".batch", "validate": ".validate",
    "export_torchscript": ".export", "load_plugins": ".plugins_loader",
    **dict.fromkeys(("Program", "Target", "compile", "load_program", "register_kernel"), ".simulator"),
}

#: Public functions that share their name with a subpackage or module of opbridge.
_FUNCTIONS_OVER_MODULES = frozenset({"convert", "batch", "validate"})


def __getattr__(name: str) -> Any:
    home = _LAZY.get(name)
    if home is None:  # a subpackage (opbridge.ir, opbridge.simulator, ...), as eager imports bound them
        if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module 'opbridge' has no attribute {name!r}")
        return importlib.import_module(f".{name}", __name__)
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        # Importing the submodule opbridge.convert binds it on the package under "convert";
        # the public name is the function (as it was when this package imported it eagerly).
        if name in _FUNCTIONS_OVER_MODULES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

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
    from .ir.passes import register_pass
    from .plugins_loader import load_plugins
    from .simulator import Program, Target, compile, load_program, register_kernel  # noqa: A004
    from .validate import validate

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
