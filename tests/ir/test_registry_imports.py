"""Every built-in op module is listed by name in FAMILIES and registers through define_op."""

from __future__ import annotations

import pkgutil

import opbridge.ir.ops as ops_pkg

#: Modules of the package that hold shared helpers and register nothing.
HELPERS = {"common"}


def test_every_op_module_is_listed():
    names = {m.name for m in pkgutil.iter_modules(ops_pkg.__path__)} - HELPERS
    missing = sorted(names - set(ops_pkg.FAMILIES))
    assert names and not missing, f"not listed in FAMILIES of opbridge/ir/ops/__init__.py: {missing}"
