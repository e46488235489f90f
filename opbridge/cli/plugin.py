"""``opbridge plugin new``: write a one-file custom-op plugin skeleton, and a test beside it.

The skeleton holds the three registrations a custom op needs (DESIGN.md, "One registry per
concern"): the op definition (schema, shape function, numpy reference), the mapping from the
origin framework's op, and the simulator kernel's tiling hints. Its example semantics are
``y = x * alpha + beta``; the test checks them against numpy and runs the mapping end to end.
"""

from __future__ import annotations

import argparse
import keyword
import re
from pathlib import Path
from string import Template
from typing import Any

from ..errors import OpbridgeError

FRAMEWORKS = ("caffe", "onnx", "torchscript")


class PluginTemplateError(OpbridgeError, ValueError):
    """``plugin new`` was given a name or path it cannot use."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "plugin",
        help="write a custom-op plugin skeleton (op definition, mapping, kernel) with a test",
        description="Tools for plugins: Python files that define ops, mappings and kernels, loaded "
        "with --plugin FILE, OPBRIDGE_PLUGIN_PATH or the 'opbridge.plugins' entry-point group.",
    )
    psub = p.add_subparsers(dest="plugin_command", metavar="SUBCOMMAND", parser_class=type(p))
    new = psub.add_parser(
        "new",
        help="write NAME's plugin file and a test beside it",
        description="Write a one-file plugin for the custom op NAME: its op definition (inputs, "
        "parameters, shape function, numpy compute), a mapping from the FRAMEWORK op of the same "
        "name, and the simulator kernel's tiling hints; plus test_<file> beside it (run it with "
        "pytest). Edit the example semantics (y = x * alpha + beta) into your op's.",
    )
    new.add_argument("name", metavar="NAME", help="the op's name, e.g. ScaleShift (a Python identifier)")
    new.add_argument("--framework", required=True, choices=FRAMEWORKS, help="the origin framework")
    new.add_argument("-o", "--output", metavar="FILE",
                     help="the plugin file to write (default ./<name in snake_case>.py)")
    new.add_argument("--force", action="store_true", help="overwrite existing files")
    new.set_defaults(func=run_new)

    def usage(args: argparse.Namespace) -> int:  # `opbridge plugin` alone: show what it offers
        p.print_help()
        return 2

    p.set_defaults(func=usage)


def snake_case(name: str) -> str:
    """``ScaleShift`` -> ``scale_shift``; ``MyOp2D`` -> ``my_op2_d``."""
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return s.lower()


def check_name(name: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name) or not name[0].isalpha():
        raise PluginTemplateError(
            f"plugin name {name!r}: must be a Python identifier starting with a letter",
            hint="use CamelCase like the built-in ops: ScaleShift, MyUpsample",
        )


def _have_kernels() -> bool:
    try:
        from ..simulator.kernels import register_kernel  # noqa: F401
    except ImportError:
        return False
    return True


def render(name: str, framework: str, filename: str) -> tuple[str, str]:
    """The plugin file's text and its test's text."""
    from .plugin_templates import IMPORTS, KERNEL_IMPORT, MAPPINGS, ORIGIN_TESTS, PLUGIN, TEST, kernel_block

    check_name(name)
    snake = snake_case(name)
    title = {"caffe": "Caffe", "onnx": "ONNX", "torchscript": "TorchScript"}[framework]
    fields = {
        "NAME": name, "title": title, "snake": snake, "framework": framework, "file": filename,
        "origin_type": {"caffe": name, "onnx": f"com.example::{name}",
                        "torchscript": f"myops::{snake}"}[framework],
    }
    kernels = _have_kernels()
    mapping = Template(MAPPINGS[framework]).substitute(fields)
    kernel = Template(kernel_block(kernels)).substitute(fields)
    imports = IMPORTS[framework] + ("\n" + KERNEL_IMPORT if kernels else "")
    rule = f"# 2. The mapping from {title} "
    rule += "-" * (97 - len(rule))
    plugin = Template(PLUGIN).substitute(mapping=mapping, kernel=kernel, imports=imports, rule=rule,
                                         math="import math\n\n" if kernels else "", **fields)
    origin_test = Template(ORIGIN_TESTS[framework]).substitute(fields)
    test = Template(TEST).substitute(origin_test=origin_test, **fields)
    return plugin, test


def run_new(args: argparse.Namespace) -> int:
    check_name(args.name)
    out = Path(args.output) if args.output else Path(f"{snake_case(args.name)}.py")
    if out.suffix != ".py":
        raise PluginTemplateError(f"plugin file '{out}': must end in .py")
    test = out.with_name(f"test_{out.name}")
    for p in (out, test):
        if p.exists() and not args.force:
            raise PluginTemplateError(f"'{p}' exists", hint="pass --force to overwrite, or -o another file")
    plugin_text, test_text = render(args.name, args.framework, out.name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(plugin_text)
    test.write_text(test_text)
    print(f"wrote {out} (op {args.name}, mapping from {args.framework}) and {test}")
    print(f"next: edit {out}, then `python -m pytest {test}` and "
          f"`opbridge convert MODEL --plugin {out}`")
    return 0
