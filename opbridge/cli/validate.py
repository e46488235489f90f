"""``opbridge validate``: run a model three ways and point at the first layer that goes wrong."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .common import (
    add_input_shape_option,
    add_input_value_option,
    add_pass_option,
    add_plugin_option,
    add_threads_option,
    check_model_file,
    check_output,
    input_values_from_args,
    non_negative_int,
    with_threads,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "validate",
        help="compare the origin framework, the interpreter and the simulator layer by layer",
        description="Run MODEL in its origin framework where installed (onnxruntime for ONNX, "
        "OpenCV cv2.dnn for Caffe, torch for TorchScript-json), in the IR reference interpreter "
        "and as a program compiled for the simulator, on the same inputs; compare the outputs "
        "and every intermediate tensor matched by its origin name (cosine and Euclidean "
        "similarity, max abs/rel error, SQNR), and report the first layer that leaves tolerance. Inputs not given are random (fixed seed). Exit 0 when every "
        "comparison passes, 1 when one fails, 2 on a user error.",
    )
    p.add_argument("model", help="a model file: .onnx, Caffe .prototxt, TorchScript .ts.json, or .obir")
    p.add_argument("--weights", metavar="W", help="weights file (Caffe .caffemodel)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE",
                   help="an input from NAME=FILE.npy, NAME=FILE.npz, FILE.npz (all its arrays) or, "
                   "for one-input models, FILE.npy (repeatable)")
    add_input_shape_option(p)
    add_input_value_option(p)
    p.add_argument("--image", metavar="[NAME=]FILE",
                   help="an image for the NCHW input with 1 or 3 channels (PNG/JPEG through OpenCV "
                   "when installed; binary PPM/PGM always)")
    p.add_argument("--mean", default="0", metavar="M[,M,M]",
                   help="subtracted from the image per channel, in --pixel-format order (default 0)")
    p.add_argument("--scale", default="1", metavar="S[,S,S]",
                   help="multiplies the image after the mean, per channel (default 1)")
    p.add_argument("--pixel-format", default="bgr", choices=("bgr", "rgb", "gray"),
                   help="channel order the model expects (default bgr, Caffe's)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the random inputs (default 0)")
    add_plugin_option(p)
    add_pass_option(p, check=False)
    p.add_argument("--tolerance", metavar="COS,EUC",
                   help="cosine and Euclidean similarity floors, e.g. 0.99,0.99 (default: per dtype; "
                   "f32 0.99,0.99, f16 0.99,0.95, bf16 0.99,0.90; integers must be equal)")
    p.add_argument("--target", default="bm1684",
                   help="simulator target: a preset name or a target .json file (default bm1684)")
    p.add_argument("--no-simulator", action="store_true", help="skip compiling and simulating")
    p.add_argument("--per-layer", action="store_true",
                   help="compile a debugging variant for the simulator that stores every layer's "
                   "output to DDR, so layers inside a layer group are compared too and the first "
                   "divergence names the layer whose inputs agree (the report says which mode ran)")
    p.add_argument("--no-origin", action="store_true",
                   help="do not run the origin framework (the interpreter becomes the reference)")
    p.add_argument("--quantize", metavar="TABLE.json|Q.obir",
                   help="compare MODEL quantized to int8 with this calibration table (or the int8 "
                   ".obir 'opbridge quantize' made from MODEL) against the float MODEL instead, "
                   "layer by layer in the interpreter (int8 tolerance 0.85,0.45 as TPU-MLIR's; the "
                   "notes name the layer where the error grows most)")
    p.add_argument("--report", metavar="R.json", help="write the report as JSON")
    p.add_argument("--html", metavar="R.html",
                   help="write the report as one self-contained HTML page (works offline): summary, "
                   "cosine/SQNR chart per layer, sortable table, graph diagram, profile timeline")
    p.add_argument("--dump-layers", dest="dump", nargs="?", const="", default=None, metavar="FILE.npz",
                   help="dump every node's inputs and outputs to FILE.npz (default "
                   "MODEL_debug.npz; same as OPBRIDGE_DEBUG=1)")
    # the option's former name, which read as the global --debug (tracebacks): still accepted,
    # with a warning, and left out of --help
    p.add_argument("--debug", dest="dump_deprecated", nargs="?", const="", default=None,
                   metavar="FILE.npz", help=argparse.SUPPRESS)
    p.add_argument("--stop-after", metavar="NODE",
                   help="stop the interpreter after this node (origin or IR name) and compare what "
                   "was computed")
    p.add_argument("--max-rows", type=non_negative_int, default=40, metavar="N", help="rows of the table to print (default 40; 0: all)")
    add_threads_option(p)
    p.set_defaults(func=with_threads(run))


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..ir.passes import with_passes
    from ..validate import validate
    from ..validate.inputs import image_spec
    from . import EXIT_FAILED, EXIT_OK

    check_model_file(args.model, "validate")
    check_output(args.report, "--report", "a JSON report", example="report.json")
    check_output(args.html, "--html", "an HTML report", example="report.html")
    dump = _dump_option(args)
    if dump == "":
        base = os.path.basename(args.model)
        dump = (base.split(".")[0] or "model") + "_debug.npz"
    if dump is not None and not dump.endswith(".npz"):
        dump += ".npz"  # as np.savez names it, so the note printed names the file written
    check_output(dump, "--dump-layers", "an .npz dump", example="debug.npz")
    image = None
    if args.image:
        image = image_spec(args.image, args.mean, args.scale, args.pixel_format)
    report = validate(
        args.model,
        weights=args.weights,
        plugins=args.plugin,
        tolerance=args.tolerance,
        input_shapes=dict(args.input_shape) or None,
        target=None if args.no_simulator else args.target,
        input_files=args.input,
        image=image,
        seed=args.seed,
        stop_after=args.stop_after,
        dump_layers=dump,
        origin=not args.no_origin,
        progress=True,
        passes=with_passes(args.extra_passes) if args.extra_passes else (),
        per_layer=args.per_layer,
        quantize=args.quantize,
        input_values=input_values_from_args(args),
    )
    console = Console(width=160 if not sys.stdout.isatty() else None)
    for name, desc in report.inputs.items():
        console.print(f"input {name}: {desc}", highlight=False)
    report.print(console, max_rows=args.max_rows)
    from ..validate.inputs import RANDOM_INPUT

    random = [name for name, desc in report.inputs.items() if f" {RANDOM_INPUT} (seed " in desc]
    values = report.first_divergence is not None and report.first_divergence.status == "different"
    if args.quantize and random and values:
        console.print(f"note: input(s) {', '.join(random)} were random values, not data like the "
                      "calibration samples, and an int8 graph is accurate only over the ranges it was "
                      "calibrated on: validate it on a sample (--input NAME=FILE.npy or --image FILE)",
                      highlight=False, soft_wrap=True)
    if args.report:
        report.write_json(args.report)
        console.print(f"report written to {args.report}", highlight=False)
    if args.html:
        report.write_html(args.html)
        console.print(f"HTML report written to {args.html}", highlight=False)
    return EXIT_OK if report.passed else EXIT_FAILED


def _dump_option(args: argparse.Namespace) -> str | None:
    """``--dump-layers``, or its deprecated spelling ``--debug`` after the command, which
    prints one warning line (the global ``opbridge --debug validate`` shows tracebacks)."""
    if args.dump_deprecated is None:
        return args.dump
    sys.stderr.write("warning: 'validate --debug [FILE.npz]' is deprecated: write --dump-layers "
                     "[FILE.npz] (for tracebacks, put --debug before the command: opbridge --debug "
                     "validate ...)\n")
    return args.dump if args.dump is not None else args.dump_deprecated
