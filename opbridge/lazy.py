"""Public names imported on first use (PEP 562), for the package ``__init__`` modules.

A package lists ``name -> module`` and gets a module ``__getattr__`` that imports the module
when the name is first read; a subpackage or submodule not in the table is imported as an
eager ``import`` would have bound it. Where a public function shares its name with a module of
the same package (``opbridge.convert``, ``opbridge.ir.interpret``), importing that module would
bind the module over the name: :func:`keep_functions` makes the package keep the function.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable
from typing import Any


def lazy_getattr(package: str, table: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` importing ``table[name]`` (relative names)."""

    def __getattr__(name: str) -> Any:
        home = table.get(name)
        module = sys.modules[package]
        if home is None:
            if name.startswith("_") or importlib.util.find_spec(f"{package}.{name}") is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            return importlib.import_module(f".{name}", package)
        value = getattr(importlib.import_module(home, package), name)
        types.ModuleType.__setattr__(module, name, value)
        return value

    return __getattr__


class _FunctionsFirst(types.ModuleType):
    _functions_over_modules: frozenset[str] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._functions_over_modules and isinstance(value, types.ModuleType):
            return  # the import system binding a submodule over the public function of that name
        super().__setattr__(name, value)


def keep_functions(package: str, names: frozenset[str]) -> None:
    """Make ``package`` keep its public functions ``names`` when same-named submodules load."""
    cls = type("_Package", (_FunctionsFirst,), {"_functions_over_modules": names})
    sys.modules[package].__class__ = cls
