"""``opbridge plugin new``: write a one-file custom-op plugin skeleton, and a test beside it.

The skeleton holds the three registrations a custom op needs (DESIGN.md, "One registry per
concern"): the op definition (schema, shape function, numpy reference), the mapping from the
origin framework's op, and the simulator kernel's tiling hints. Its example semantics are
``y = x * alpha + beta``; the test checks them against numpy and runs the mapping end to end.
The test goes into a ``tests/`` folder beside the plugin, so that a plugin folder on
``OPBRIDGE_PLUGIN_PATH`` never imports it as a plugin.

A NAME that is already a built-in op, or whose origin op already has a built-in mapping, is
refused unless ``--override`` (the plugin then replaces them, with ``override=True``).
"""

from __future__ import annotations

import argparse
import keyword
import re
import textwrap
from dataclasses import dataclass
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
        "name, and the simulator kernel's tiling hints; plus tests/test_<file> beside it (run it "
        "with pytest; in tests/ so that a plugin folder on OPBRIDGE_PLUGIN_PATH does not load it). "
        "Edit the example semantics (y = x * alpha + beta) into your op's. A NAME that is a "
        "built-in op or has a built-in mapping is refused (exit 2) unless --override.",
    )
    new.add_argument("name", metavar="NAME", help="the op's name, e.g. ScaleShift (a Python identifier)")
    new.add_argument("--framework", required=True, choices=FRAMEWORKS, help="the origin framework")
    new.add_argument("-o", "--output", metavar="FILE",
                     help="the plugin file to write (default ./<name in snake_case>.py)")
    new.add_argument("--force", action="store_true", help="overwrite existing files")
    new.add_argument("--override", action="store_true",
                     help="NAME is a built-in op or has a built-in mapping: write a plugin that "
                     "replaces them (override=True on those registrations)")
    where = new.add_mutually_exclusive_group()
    where.add_argument("--global-only", action="store_true",
                       help="no tiling hints: the op runs as a global layer on whole tensors")
    where.add_argument("--cpu", action="store_true",
                       help="the op runs on the host CPU, between TPU segments (no kernel)")
    new.set_defaults(func=run_new)

    def usage(args: argparse.Namespace) -> int:  # `opbridge plugin` alone: show what it offers
        import sys

        p.print_help()
        sys.stderr.write("error: opbridge plugin: no SUBCOMMAND given\n")
        sys.stderr.write("hint: 'opbridge plugin new NAME --framework onnx' writes a plugin and its test\n")
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


@dataclass
class Collisions:
    """What a plugin named NAME would replace: (what, where it is registered) pairs."""

    op: str | None = None
    #: the built-in mapping of the very key the plugin registers (it needs override=True)
    mapping: str | None = None
    #: a built-in mapping of the plain NAME (ONNX, TorchScript), which the plugin's
    #: domain-pinned key does not replace but competes with for nodes of its domain
    plain: str | None = None
    kernel: str | None = None

    def describe(self, name: str, framework: str) -> list[str]:
        out = []
        if self.op:
            out.append(f"the built-in IR op {name} (defined at {self.op})")
        if self.mapping:
            out.append(f"the built-in {framework} mapping of {name} (registered at {self.mapping})")
        elif self.plain:
            out.append(f"the built-in {framework} mapping of {name} (registered at {self.plain}; "
                       "the plugin's domain-pinned mapping wins for nodes of its domain)")
        return out


def collisions(name: str, framework: str) -> Collisions:
    """The built-in op, mapping and kernel that a plugin named ``name`` would collide with."""
    from ..ir import DEFAULT_OPS
    from ..mappers import DEFAULT_MAPPINGS

    c = Collisions()
    if name in DEFAULT_OPS:
        c.op = DEFAULT_OPS.get(name).defined_at
    origin = {"caffe": name, "onnx": f"com.example::{name}", "torchscript": f"myops::{snake_case(name)}"}
    domain, _, op = origin[framework].rpartition("::")
    entry = DEFAULT_MAPPINGS.find(framework, op, domain)
    if entry is not None and (entry.domain or "") == domain:
        c.mapping = entry.defined_at
    entry = DEFAULT_MAPPINGS.find(framework, name) if domain else None
    if entry is not None and entry.domain is None:
        c.plain = entry.defined_at
    if _have_kernels():
        from ..simulator.kernels.registry import DEFAULT_KERNELS

        k = DEFAULT_KERNELS.get(name)
        c.kernel = k.registered_at if k is not None else None
    return c


def render(name: str, framework: str, filename: str, *, kind: str = "tiled",
           override: Collisions | None = None, test_path: str | None = None) -> tuple[str, str]:
    """The plugin file's text and its test's text. ``kind``: ``tiled`` (tiling hints),
    ``global`` (no tiling hints) or ``cpu`` (runs on the host); ``override``: the built-ins the
    plugin replaces (``override=True`` on those registrations)."""
    from .plugin_templates import IMPORTS, KERNEL_IMPORT, MAPPINGS, ORIGIN_TESTS, PLUGIN, TEST, kernel_block

    check_name(name)
    snake = snake_case(name)
    title = {"caffe": "Caffe", "onnx": "ONNX", "torchscript": "TorchScript"}[framework]
    ov = override or Collisions()
    fields = {
        "NAME": name, "title": title, "snake": snake, "framework": framework, "file": filename,
        "origin_type": {"caffe": name, "onnx": f"com.example::{name}",
                        "torchscript": f"myops::{snake}"}[framework],
        "override_op": ", override=True" if ov.op else "",
        "override_map": ", override=True" if ov.mapping else "",
        "override_kernel": ", override=True" if ov.kernel else "",
        "imply": "ImplyType.CPU" if kind == "cpu" else "ImplyType.TPU",
        "cpu_mapping": " and the mapping's ImplyType.CPU" if framework == "caffe" else "",
    }
    kernels = _have_kernels() and kind != "cpu"
    mapping = Template(MAPPINGS[framework]).substitute(fields)
    kernel = Template(kernel_block(kernels, kind)).substitute(fields)
    imports = IMPORTS[framework] + ("\n" + KERNEL_IMPORT if kernels else "")
    rule = f"# 2. The mapping from {title} "
    rule += "-" * (97 - len(rule))
    replaced = ov.describe(name, framework)
    override_doc = "\n\n" + textwrap.fill(
        "This plugin REPLACES " + " and ".join(replaced) + ": models that used the built-in now get "
        "this op.", 95, break_on_hyphens=False) if replaced else ""
    placement = ('\n    .placement("cpu")  # every node of the op runs on the host, between TPU '
                 'segments') if kind == "cpu" else ""
    plugin = Template(PLUGIN).substitute(
        mapping=mapping, kernel=kernel, imports=imports, rule=rule, placement=placement,
        math="import math\n\n" if kernels else "", override_doc=override_doc,
        test_path=test_path or f"tests/test_{filename}", **fields)
    origin_test = Template(ORIGIN_TESTS[framework]).substitute(fields)
    # a tiled op alone in a graph runs as a global layer, as the chip runs a one-op group:
    # on the TPU either way, in a layer group once it has a neighbour
    where_check = {"tiled": "p.num_cpu_layers == 0 and p.num_layer_groups + p.num_global_layers == 1",
                   "global": "p.num_global_layers == 1",
                   "cpu": "p.num_cpu_layers == 1"}[kind if _have_kernels() else "global"]
    test = Template(TEST).substitute(origin_test=origin_test, where_check=where_check, **fields)
    return plugin, test


def run_new(args: argparse.Namespace) -> int:
    check_name(args.name)
    out = Path(args.output) if args.output else Path(f"{snake_case(args.name)}.py")
    if out.suffix != ".py":
        raise PluginTemplateError(f"plugin file '{out}': must end in .py",
                                  hint="give -o NAME.py (plugins are Python files)")
    if out.name.startswith("test_"):
        raise PluginTemplateError(f"plugin file '{out}': a name starting with test_ is not loaded as "
                                  "a plugin (those are tests)", hint="name the file after the op")
    clash = collisions(args.name, args.framework)
    replaced = clash.describe(args.name, args.framework)
    if replaced and not args.override:
        raise PluginTemplateError(
            f"plugin name '{args.name}' collides with " + " and with ".join(replaced),
            hint=f"choose another NAME (e.g. My{args.name}), or pass --override to write a plugin "
                 "that replaces the built-in (override=True)")
    test = out.parent / "tests" / f"test_{out.name}"
    for p in (out, test):
        if p.exists() and not args.force:
            raise PluginTemplateError(f"'{p}' exists", hint="pass --force to overwrite, or -o another file")
    kind = "cpu" if args.cpu else ("global" if args.global_only else "tiled")
    plugin_text, test_text = render(args.name, args.framework, out.name, kind=kind,
                                    override=clash if args.override else None,
                                    test_path=str(Path("tests") / test.name))
    out.parent.mkdir(parents=True, exist_ok=True)
    test.parent.mkdir(exist_ok=True)
    out.write_text(plugin_text)
    test.write_text(test_text)
    if replaced:
        print(f"warning: {out} replaces {' and '.join(replaced)} (--override)")
    print(f"wrote {out} (op {args.name}, mapping from {args.framework}, {_KINDS[kind]}) and {test}")
    print(f"next: edit {out}, then `python -m pytest {test}` and "
          f"`opbridge convert MODEL --plugin {out}`")
    return 0


_KINDS = {"tiled": "tiled kernel", "global": "global layer, no tiling hints", "cpu": "runs on the host"}
