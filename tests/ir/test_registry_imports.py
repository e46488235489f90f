"""Every built-in op module is imported by name and registers through define_op."""

from __future__ import annotations

import pkgutil
import sys

import opbridge  # noqa: F401
import opbridge.ir.ops as ops_pkg


def test_every_op_module_is_imported():
    names = [m.name for m in pkgutil.iter_modules(ops_pkg.__path__)]
    missing = [n for n in names if f"opbridge.ir.ops.{n}" not in sys.modules]
    assert names and not missing, f"not imported in opbridge/ir/ops/__init__.py: {missing}"
