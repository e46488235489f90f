"""``opbridge show``: print a readable listing of a .obir graph."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_plugin_option


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "show",
        help="print a readable listing of a .obir graph",
        description="Print a .obir graph: its inputs, every node with op, attributes, input and "
        "output names, shapes and dtypes, and the node's origin.",
    )
    p.add_argument("model", help="a .obir file")
    add_plugin_option(p)
    p.add_argument("--max-nodes", type=int, default=None, help="list at most this many nodes")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..ir import format_graph, load
    from ..plugins_loader import load_plugins

    load_plugins(args.plugin)
    g = load(args.model)
    print(format_graph(g, max_nodes=args.max_nodes))
    return 0
