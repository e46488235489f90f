"""``opbridge ops``: list the IR ops (and, with --framework, the mapped origin op types)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from .common import add_plugin_option


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ops",
        help="list the IR ops (inputs, outputs, params, dtypes)",
        description="List every IR op with its inputs, outputs, parameters (type, default, "
        "range) and allowed dtypes.",
    )
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    add_plugin_option(p)
    p.add_argument("--framework", choices=("onnx", "caffe", "torchscript"), default=None,
                   help="list the origin op types (and versions) mapped from this framework instead")
    p.set_defaults(func=run)


def _param_text(d: dict[str, Any]) -> str:
    s = f"{d['name']}:{d['type']}"
    if d["required"]:
        s += "(required)"
    else:
        s += f"={d['default']!r}" if not isinstance(d["default"], list) else f"={d['default']}"
    rng = []
    if "minimum" in d:
        rng.append(f">={d['minimum']}")
    if "maximum" in d:
        rng.append(f"<={d['maximum']}")
    if "allowed" in d:
        rng.append("|".join(map(str, d["allowed"])))
    if rng:
        s += " [" + ",".join(rng) + "]"
    return s


def run(args: argparse.Namespace) -> int:
    from ..plugins_loader import load_plugins

    load_plugins(args.plugin)
    if args.framework:
        from ..mappers.listing import format_mapped_ops, mapped_ops

        if args.format == "json":
            json.dump(mapped_ops(args.framework), sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            sys.stdout.write(format_mapped_ops(args.framework) + "\n")
        return 0
    from ..ir.opdef import DEFAULT_OPS, op_info  # numpy and every op family: only when listing

    infos = [op_info(o) for o in DEFAULT_OPS]
    if args.format == "json":
        json.dump([dataclasses.asdict(i) for i in infos], sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(infos)} IR ops", show_lines=False)
    for col in ("op", "inputs", "outputs", "params", "dtypes"):
        table.add_column(col, overflow="fold")
    for i in infos:
        ins = ", ".join(
            p["name"] + ("?" if p.get("optional") else "") + ("..." if p.get("variadic") else "")
            for p in i.inputs
        )
        outs = ", ".join(p["name"] + ("..." if p.get("variadic") else "") for p in i.outputs)
        params = "; ".join(_param_text(p) for p in i.params)
        dts = "; ".join(f"{k}: {','.join(v)}" for k, v in i.type_params.items())
        table.add_row(i.name, ins, outs, params, dts)
    Console(width=200 if not sys.stdout.isatty() else None).print(table)
    return 0
