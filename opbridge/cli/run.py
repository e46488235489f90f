"""``opbridge run``: run a ``.obprog`` program on the simulator."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import (
    add_plugin_option,
    add_threads_option,
    check_output,
    check_program_file,
    non_negative_int,
    static_program,
    with_threads,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run a compiled .obprog program on the simulator",
        description="Run PROG on inputs given as .npy/.npz files (--input NAME=FILE.npy) or random "
        "ones (--random-input); prints each output's shape and range, and writes them to an "
        ".npz with -o.",
    )
    p.add_argument("program", help="a .obprog file")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                     help="an input from a .npy file, or NAME=FILE.npz (its array NAME, or its one "
                     "array) (repeatable); FILE.npz alone gives the inputs its arrays name, "
                     "FILE.npy alone the input of a program with one")
    src.add_argument("--random-input", action="store_true", help="random inputs (seeded)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of --random-input (default 0)")
    add_plugin_option(p)
    p.add_argument("-o", "--output", metavar="OUT.npz", help="write the outputs here")
    add_threads_option(p)
    p.set_defaults(func=with_threads(run))


def random_feeds(graph: Any, seed: int) -> dict[str, Any]:
    """Standard-normal floats, small non-negative integers, for every graph input."""
    import numpy as np

    from ..ir.types import to_numpy_dtype

    rng = np.random.default_rng(seed)
    feeds = {}
    for v in graph.inputs:
        dt = to_numpy_dtype(v.dtype)
        if dt.kind == "f":
            feeds[v.name] = rng.standard_normal(v.shape).astype(dt)
        elif dt.kind == "b":
            feeds[v.name] = rng.random(v.shape) < 0.5
        else:
            feeds[v.name] = rng.integers(0, 10, v.shape).astype(dt)
    return feeds


def run(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from ..plugins_loader import load_plugins
    from ..simulator import load_program

    check_output(args.output, "-o", "an .npz archive of the outputs", example="out.npz")  # the name as typed
    if args.output and not args.output.endswith(".npz"):
        args.output += ".npz"  # as numpy.savez names it (it adds .npz unless the name ends so)
        check_output(args.output, "-o", "an .npz archive of the outputs", example="out.npz")
    check_program_file(args.program, args.command)
    load_plugins(args.plugin)
    prog = load_program(args.program)
    # a program compiled with --dynamic gets random inputs of the largest shapes it was compiled for
    graph = static_program(prog).graph
    if not args.random_input and not args.input:
        from ..errors import OpbridgeError

        names = ", ".join(f"{v.name} {v.dtype}{list(v.shape)}" for v in graph.inputs) or "none"
        raise OpbridgeError(f"'{args.program}' needs its inputs: give --input NAME=FILE.npy for each "
                            f"(its inputs: {names}) or --random-input",
                            hint=f"opbridge run {args.program} --random-input runs it on random data")
    if args.random_input:
        feeds = random_feeds(graph, args.seed)
    else:
        from ..validate.inputs import load_input_specs

        # a --dynamic program takes any shape up to its largest; it names an input too large
        feeds, _ = load_input_specs(graph, args.input, shapes=static_program(prog) is prog)
    t0 = time.perf_counter()
    outs = prog.run(feeds)
    dt = time.perf_counter() - t0
    for name, a in outs.items():
        rng = (f" min {a.min():.6g} max {a.max():.6g} mean {a.astype(np.float64).mean():.6g}"
               if a.size and a.dtype.kind in "fiu" else "")
        sys.stdout.write(f"{name}: {a.dtype}{list(a.shape)}{rng}\n")
    sys.stdout.write(f"ran {args.program} in {dt * 1e3:.1f} ms\n")
    if args.output:
        from ..ir.io import atomic_write

        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:  # a file object: numpy would add .npz to the temporary name
                np.savez(f, **outs)

        atomic_write(args.output, write)
        sys.stdout.write(f"wrote {args.output}\n")
    return 0
