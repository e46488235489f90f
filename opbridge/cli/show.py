"""``opbridge show``: print a readable listing of a graph (a .obir, or any model file ``convert`` reads)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_model_options, load_model, non_negative_int


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "show",
        help="print a readable listing of a graph (.obir or a model file)",
        description="Print MODEL's IR graph: its inputs, every node with op, attributes, input "
        "and output names, shapes and dtypes, and the node's origin. MODEL is a .obir graph, or "
        "a model file that 'opbridge convert' reads (converted first, with the same options; a Caffe "
        "prototxt without --weights gets random blobs, as 'opbridge random-weights' writes them).",
    )
    p.add_argument("model", help="a .obir graph or a model file (.onnx, .prototxt, .ts.json)")
    add_model_options(p)
    p.add_argument("--max-nodes", type=non_negative_int, default=None, help="list at most this many nodes")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..ir import format_graph

    if str(args.model).lower().endswith(".prototxt") and not args.weights:
        # a listing shows the net's structure, which a deploy file alone gives: the weights a
        # conversion needs are made up, as 'opbridge random-weights' would write them
        from ..mappers.weights import provide_weights
        from ..tools.caffe_weights import RandomBlobs

        with provide_weights(RandomBlobs(seed=0)):
            g = load_model(args)
        print("# no --weights: the blobs are random (seed 0), the structure and shapes are the prototxt's")
    else:
        g = load_model(args)
    print(format_graph(g, max_nodes=args.max_nodes))
    return 0
