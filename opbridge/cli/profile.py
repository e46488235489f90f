"""``opbridge profile``: the cost model's estimate of a ``.obprog`` program, per layer group."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import add_plugin_option, check_output, check_program_file, static_program


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "profile",
        help="estimate a .obprog program's latency, DDR traffic and local-memory use",
        description="Print the cost model's estimate of PROG: latency, GDMA bytes, local-memory "
        "peak, and a table per unit (layer group, global layer, host op) with its ops, tiles, "
        "local memory, GDMA bytes, estimated time and whether GDMA (DDR traffic) or compute bounds it.",
    )
    p.add_argument("program", help="a .obprog file")
    p.add_argument("--trace", metavar="trace.json",
                   help="write the timeline (Chrome trace-event JSON, one track per engine)")
    p.add_argument("--json", action="store_true", help="print the profile as JSON instead")
    p.add_argument("--html", metavar="P.html",
                   help="also write the profile as one self-contained HTML page: figures, timeline "
                   "per engine, units, and the graph coloured by layer group")
    add_plugin_option(p)
    p.set_defaults(func=run)


def _write_html(prog: Any, path: str) -> None:
    from pathlib import Path

    from ..ir.io import atomic_write
    from ..validate.html import profile_html

    page = profile_html(prog)
    atomic_write(path, lambda tmp: Path(tmp).write_text(page, encoding="utf-8"))


def run(args: argparse.Namespace) -> int:
    from ..plugins_loader import load_plugins
    from ..simulator import load_program

    check_output(args.trace, "--trace", "a trace", example="trace.json")
    check_output(args.html, "--html", "an HTML page", example="profile.html")
    check_program_file(args.program, args.command)
    load_plugins(args.plugin)
    loaded = load_program(args.program)
    prog = static_program(loaded)  # compiled with --dynamic: the program for its largest shapes
    dynamic = " (dynamic: its largest shapes)" if prog is not loaded else ""
    p = prog.profile()
    if args.trace:
        p.write_trace(args.trace)
    if args.html:
        _write_html(prog, args.html)
    if args.json:
        sys.stdout.write(json.dumps(p.to_dict(), indent=2) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    from ..validate.html import op_summary

    t = Table(title=f"{prog.graph.name}{dynamic} on {prog.target.name} "
                    f"({prog.target.lmem_bytes_per_lane // 1024} KiB local memory per lane)")
    for col in ("#", "kind", "ops", "tiles", "lmem KiB", "GDMA KiB", "est ms", "bound"):
        t.add_column(col, justify="right" if col not in ("kind", "ops", "bound") else "left")
    for u in p.units:
        t.add_row(str(u.index), u.kind, op_summary(u.ops), str(u.tiles),
                  f"{u.lmem_bytes / 1024:.1f}", f"{u.gdma_bytes / 1024:.0f}", f"{u.est_ms:.4f}",
                  u.bound)
    con = Console()
    con.print(t)
    con.print(
        f"estimated latency {p.est_latency_ms:.3f} ms; GDMA {p.gdma_bytes / 2**20:.2f} MiB; "
        f"local memory peak {p.lmem_peak_bytes / 1024:.1f} KiB/lane; {p.num_layer_groups} layer "
        f"groups, {p.num_tiles} tiles, {p.num_global_layers} global layers, {p.num_cpu_layers} "
        f"host ops; {p.flops / 1e9:.2f} GFLOP; DDR activations {p.ddr_peak_bytes / 2**20:.2f} MiB "
        f"(no reuse {p.ddr_no_reuse_bytes / 2**20:.2f} MiB), weights {p.weights_bytes / 2**20:.1f} MiB")
    total_ms = sum(u.est_ms for u in p.units)
    if total_ms > 0:
        in_groups = sum(u.est_ms for u in p.units if u.kind == "group") / total_ms
        con.print(f"{100 * in_groups:.0f}% of the time in layer groups")
    if p.ddr_shared_bytes or p.lmem_shared_bytes:
        con.print(f"shared buffers (reshapes, in-place layers) save {p.ddr_shared_bytes / 1024:.1f} KiB "
                  f"of DDR and {p.lmem_shared_bytes / 1024:.1f} KiB/lane of local memory")
    if args.trace:
        con.print(f"wrote {args.trace} (open it in chrome://tracing or ui.perfetto.dev)")
    if args.html:
        con.print(f"wrote {args.html} (a self-contained page: open it in any browser)")
    return 0
