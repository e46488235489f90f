"""``opbridge convert``: a model file -> a verified ``.obir`` graph."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .common import (
    add_model_options,
    add_pass_option,
    check_model_file,
    check_output,
    convert_checked,
    input_shapes_from_args,
    input_values_from_args,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "convert",
        help="convert a model (.onnx, Caffe .prototxt, TorchScript .ts.json) to a .obir graph",
        description="Parse MODEL, map every op through the mapping registry (every unsupported op "
        "is reported at once, with the line that would register a mapping), verify the IR, run "
        "the IR passes (constant folding, dead-code elimination, and each --pass: a fusion a "
        "plugin registers, checked against the unfused graph with --check-passes) and write "
        "OUT.obir atomically.",
    )
    p.add_argument("model", help="the model file")
    add_model_options(p)
    p.add_argument("--passes", metavar="P1,P2", default=None,
                   help="IR passes to run, comma-separated (default: fold_constants,dead_code; "
                   "'none' for none; fold_batchnorm folds BatchNormalization into Conv)")
    add_pass_option(p)
    p.add_argument("-o", "--output", required=True, metavar="OUT.obir", help="where to write the graph")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..ir.io import save
    from . import EXIT_FAILED

    check_model_file(args.model, "convert")
    check_output(args.output, "-o", "a .obir graph", ".obir")
    t0 = time.perf_counter()
    graph = convert_checked(args.model, args, weights=args.weights, input_shapes=input_shapes_from_args(args),
                            plugins=args.plugin, input_values=input_values_from_args(args))
    if graph is None:  # --check-passes found a pass that changed a result; it said which
        return EXIT_FAILED
    save(graph, args.output)
    nbytes = sum(c.data.nbytes for c in graph.constants.values() if c.data is not None)
    ins = ", ".join(f"{v.name}:{v.dtype}[{', '.join(map(str, v.shape))}]" for v in graph.inputs)
    sys.stdout.write(
        f"wrote {args.output}: {len(graph.nodes)} nodes, {len(graph.constants)} constants "
        f"({nbytes / 2**20:.1f} MiB), inputs {ins}; {time.perf_counter() - t0:.2f} s\n"
    )
    return 0
