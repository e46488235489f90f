"""``opbridge compile``: a model (.obir, or any file ``convert`` reads) -> a ``.obprog`` program."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .common import (
    add_model_options,
    add_pass_option,
    check_output,
    input_shapes_from_args,
    load_model,
    positive_int,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compile",
        help="compile a model for the simulated TPU into a .obprog program",
        description="Compile MODEL (a .obir graph, or a model file that 'opbridge convert' "
        "reads) for a target: placement and kernel per op, layer groups tiled to fit local "
        "memory, a DDR plan, and the instruction list; writes OUT.obprog.",
    )
    p.add_argument("model", help="a .obir graph or a model file (.onnx, .prototxt, .ts.json)")
    add_model_options(p, input_shape_help="fix an input's dims (symbolic, or a Caffe net's declared "
                      "batch), e.g. data=1,3,224,224; with --dynamic, the largest size of each "
                      "symbolic dim (repeatable)")
    p.add_argument("--dynamic", action="store_true",
                   help="compile once for the largest shapes (--input-shape) and run any smaller "
                   "input along the model's symbolic dims, with the results of a program compiled "
                   "for that exact shape (each new shape is planned on its first run); a larger "
                   "input is an error naming the input, the dim and the compiled maximum")
    add_pass_option(p)
    p.add_argument("--target", default="bm1684",
                   help="target preset (bm1684 or bm1684x) or a target .json file, as validate's "
                   "(default: bm1684)")
    p.add_argument("--target-json", metavar="F", help="a target JSON file (overrides --target)")
    p.add_argument("--lmem-kib", type=positive_int, metavar="N",
                   help="local memory per lane in KiB (overrides the target's)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.obprog",
                   help="where to write the program")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..simulator import Target, compile
    from ..simulator.target import resolve_target
    from . import EXIT_FAILED

    check_output(args.output, "-o", "a .obprog program", not_a_model=".obprog")
    target = Target.load(args.target_json) if args.target_json else resolve_target(args.target)
    t0 = time.perf_counter()
    # --dynamic keeps the symbolic dims: --input-shape gives their maxima to compile instead
    graph = load_model(args, input_shapes=not args.dynamic)
    if graph is None:
        return EXIT_FAILED
    t1 = time.perf_counter()
    if args.dynamic:
        dyn = compile(graph, target, dynamic=True, max_shapes=input_shapes_from_args(args) or {},
                      lmem_kib=args.lmem_kib)
        prog = dyn.program
    else:
        dyn = prog = compile(graph, target, lmem_kib=args.lmem_kib)
    target = prog.target
    t2 = time.perf_counter()
    dyn.save(args.output)
    ddr = prog.ddr
    sys.stdout.write(
        f"wrote {args.output}: {prog}{_dynamic_note(dyn) if args.dynamic else ''}\n"
        f"  target {target.name}: {target.lanes} lanes x {target.lmem_bytes_per_lane // 1024} KiB "
        f"local memory\n"
        f"  DDR: weights {ddr.weights_bytes / 2**20:.1f} MiB, activations peak "
        f"{ddr.activation_peak_bytes / 2**20:.2f} MiB (no reuse: "
        f"{ddr.activation_no_reuse_bytes / 2**20:.2f} MiB)\n"
        f"  load {t1 - t0:.2f} s, compile {t2 - t1:.2f} s\n"
    )
    return 0


def _dynamic_note(dyn: Any) -> str:
    shapes = ", ".join(f"{k}={','.join(map(str, v))}" for k, v in dyn.max_shapes.items())
    return f"; dynamic, any input up to {shapes}"
