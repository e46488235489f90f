"""``opbridge batch``: validate, convert or compile a whole model zoo at once, locally or on Ray."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import (
    add_input_shape_option,
    add_input_value_option,
    add_pass_option,
    add_plugin_option,
    input_shapes_from_args,
    input_values_from_args,
    non_negative_int,
    positive_int,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "batch",
        help="validate, convert or compile many models at once (local process pool or Ray)",
        description="Run MODE (validate, convert or compile) on every model in MODELS (files, or "
        "folders searched for .onnx, .prototxt, .ts.json and .obir files), each in its own worker "
        "process, or as Ray tasks with --ray. Writes DIR/<name>/ per model (model.obir, "
        "model.obprog, report.json and report.html, or profile.html) and DIR/summary.json and "
        "DIR/summary.html, and prints a summary table. A model that fails (malformed file, "
        "unsupported op) is listed with its error; the others still run. A Caffe prototxt takes "
        "--weights only when it is the only model; otherwise its sibling NAME.caffemodel, else "
        "random weights (seeded by --seed). Exit 0 when every model passed, 1 when a validation "
        "did not pass, 2 when a model failed with a user error (3: an internal error).",
    )
    p.add_argument("mode", choices=("validate", "convert", "compile"), help="what to do to each model")
    p.add_argument("models", nargs="+", metavar="MODEL", help="model files or folders of them")
    p.add_argument("-o", "--output", default="opbridge-batch", metavar="DIR",
                   help="output folder (default: opbridge-batch)")
    p.add_argument("--jobs", type=positive_int, metavar="N",
                   help="worker processes of the local pool (default: min(CPUs, models))")
    p.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                   help="run the models as Ray tasks: on the cluster at ADDRESS (e.g. auto, or "
                   "ray://head:10001), or on a local Ray started for this run when no ADDRESS "
                   "is given (needs the 'ray' extra: pip install 'opbridge[ray]')")
    p.add_argument("--weights", metavar="W", help="weights file (Caffe .caffemodel), with one model only")
    add_input_shape_option(p)
    add_input_value_option(p)
    add_plugin_option(p)
    add_pass_option(p, check=False)
    p.add_argument("--target", default="bm1684", help="simulator target: a preset name or a target .json file (default: bm1684)")
    p.add_argument("--seed", type=non_negative_int, default=0,
                   help="seed of random inputs and random Caffe weights (default 0)")
    p.add_argument("--tolerance", metavar="COS,EUC",
                   help="validate: cosine and Euclidean similarity floors (default: per dtype)")
    p.set_defaults(func=run)


_DONE = {"validate": "validated", "convert": "converted", "compile": "compiled"}


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..batch import batch
    from ..ir.passes import with_passes

    result = batch(args.mode, args.models, output=args.output, jobs=args.jobs, ray=args.ray,
                   weights=args.weights, plugins=args.plugin, input_shapes=input_shapes_from_args(args),
                   target=args.target, seed=args.seed, tolerance=args.tolerance, progress=True,
                   passes=with_passes(args.extra_passes) if args.extra_passes else None,
                   input_values=input_values_from_args(args))
    console = Console(width=160 if not sys.stdout.isatty() else None)
    result.print(console)
    errors = [m for m in result.models if m.status == "error"]
    if errors:  # the table is on stdout: the error contract's two lines go to stderr
        first = errors[0]
        sys.stderr.write(f"error: {len(errors)} of {len(result.models)} models could not be "
                         f"{_DONE.get(args.mode, 'processed')} (first: "
                         f"'{first.path}': {(first.error or '').splitlines()[0] if first.error else '?'})\n")
        sys.stderr.write(f"hint: each model's error is in the table and in {args.output}/summary.json; "
                         f"run one alone ('opbridge {args.mode} MODEL') for its hint\n")
    return result.exit_code
