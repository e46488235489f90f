"""``opbridge random-weights``: write a caffemodel with random blobs for a deploy prototxt."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_input_shape_option, add_plugin_option, check_output, non_negative_int


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "random-weights",
        help="write a caffemodel with random weights for a deploy prototxt",
        description="Write a caffemodel whose blobs have the shapes the prototxt's layers need, "
        "filled with random values that keep activations finite (He-style scaling, BatchNorm "
        "with positive variance and a scale factor), so a net can be tested without its "
        "real weights. The shapes are those the layers' mappings read, so a plugin's layers "
        "(--plugin) take part like built-in ones. The same seed gives the same bytes. Other "
        "Caffe readers (OpenCV's) load the file.",
    )
    p.add_argument("prototxt", help="a deploy prototxt")
    p.add_argument("-o", "--output", required=True, metavar="OUT.caffemodel",
                   help="the caffemodel to write (any name; give it to --weights)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed, >= 0 (default 0)")
    add_input_shape_option(p)
    add_plugin_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from ..tools.random_weights import random_weights

    check_output(args.output, "-o", "Caffe weights", example="net.caffemodel")
    written = random_weights(args.prototxt, args.output, seed=args.seed,
                             input_shapes=dict(args.input_shape) or None, plugins=args.plugin)
    total = sum(int(np.prod(s)) for shapes in written.values() for s in shapes)
    print(f"wrote {args.output}: {len(written)} weighted layers, {total:,} parameters")
    return 0
