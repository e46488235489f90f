"""``opbridge demo``: the main job, end to end, on the bundled example models (or given ones).

For each model: prepare it (write the ONNX example, generate Caffe weights with a fixed seed),
convert it to IR (saved as .obir), compile it for the target (saved as .obprog), run it on the
simulator, validate it layer by layer, and print the report and the profile summary. A stage
whose part of opbridge is missing from this installation is skipped with a note, not failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import OpbridgeError
from .common import (
    add_input_shape_option,
    add_input_value_option,
    add_pass_option,
    add_plugin_option,
    add_threads_option,
    input_values_from_args,
    non_negative_int,
    passes_from_args,
    with_threads,
)


class DemoError(OpbridgeError, ValueError):
    """A model given to the demo cannot be used."""


@dataclass
class DemoModel:
    """One model the demo runs: its file, framework, weights (if separate) and how it was made."""

    name: str
    framework: str
    path: Path | None = None
    weights: Path | None = None
    note: str = ""
    #: why the model cannot run in this installation ("" when it can)
    missing: str = ""


@dataclass
class DemoResult:
    """What happened to one model: each stage's outcome, and whether validation passed."""

    name: str
    stages: dict[str, str] = field(default_factory=dict)
    passed: bool | None = None
    #: the stage running now (marked "error" if it raises)
    current: str = "convert"
    error: str = ""
    #: what validation compared against, and the estimated latency on the target
    reference: str = ""
    latency_ms: float | None = None


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="convert, compile, run and validate the bundled example models (or given ones)",
        description="The main job on two bundled examples -- a small Caffe net of SqueezeNet-style "
        "fire modules (weights generated with a fixed seed) and an ONNX CNN built with onnx.helper "
        "-- or on the MODEL files given: convert to IR, compile for the target, run on the "
        "simulator, validate layer by layer against the origin framework and the reference "
        "interpreter, and print the report and the profile summary. A Caffe prototxt without "
        "--weights gets random weights. Exit 0 when every validation passes, 1 when one fails, 2 "
        "when a model cannot be used (it is reported and the other models still run).",
    )
    p.add_argument("models", nargs="*", metavar="MODEL",
                   help="model files (.onnx, .prototxt, .ts.json) or folders holding one "
                   "(e.g. ../shared/models/caffe/squeezenet_v1.1); default: the bundled examples")
    p.add_argument("--weights", metavar="W", help="weights of the (single) MODEL given")
    add_input_shape_option(p)
    add_input_value_option(p)
    p.add_argument("--out-dir", default="out/demo", help="where to write the demo's files: the bundled models, their .obir, .obprog, "
                   "validation reports and traces (default out/demo)")
    p.add_argument("--target", default="bm1684", help="simulator target (default bm1684)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of random weights and inputs")
    add_plugin_option(p)
    add_pass_option(p, check=False)
    p.add_argument("--max-rows", type=non_negative_int, default=24, help="rows of each validation table (default 24; 0: all)")
    add_threads_option(p)
    p.set_defaults(func=with_threads(run))


def _have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def _can_parse(suffix: str) -> bool:
    try:
        from ..convert import PARSERS
    except ImportError:
        return False
    return suffix in PARSERS


def bundled_models(out: Path, seed: int) -> list[DemoModel]:
    """The two bundled examples, written into ``out`` (Caffe weights only if the frontend exists):
    the prototxt is copied there too, so that every file the tour's commands take is in ``out``."""
    import shutil

    from ..examples import fire_net_prototxt, write_small_cnn_onnx

    models = []
    proto = out / "fire_net.prototxt"
    shutil.copyfile(fire_net_prototxt(), proto)
    caffe = DemoModel("fire_net", "caffe", proto, note="bundled Caffe net, SqueezeNet-style fire modules")
    if not _can_parse(".prototxt"):
        caffe.missing = "this opbridge has no Caffe frontend"
    models.append(caffe)
    onnx_path = Path(write_small_cnn_onnx(out / "small_cnn.onnx", seed=seed))
    models.append(DemoModel("small_cnn", "onnx", onnx_path, note="bundled ONNX CNN built with onnx.helper"))
    return models


def given_model(spec: str, weights: str | None) -> DemoModel:
    """A model from a path: a file, or a folder holding one model file."""
    p = Path(spec)
    if p.is_dir():
        found = sorted([*p.glob("*.onnx"), *p.glob("*.ts.json"), *p.glob("deploy.prototxt")]) or sorted(
            p.glob("*.prototxt"))
        if not found:
            raise DemoError(f"folder '{p}' holds no .onnx, .ts.json or .prototxt model",
                            hint="give the model file itself, or a folder holding one .onnx, .ts.json or "
                                 "(deploy).prototxt")
        name = p.name
        p = found[0]
    elif p.is_file():
        name = p.name.split(".")[0]
    else:
        raise DemoError(f"model '{spec}' does not exist",
                        hint="check the path; without MODEL the demo runs its two bundled examples")
    from ..validate.runners import detect_framework

    fw = detect_framework(p)
    if fw not in ("onnx", "caffe", "torchscript"):
        raise DemoError(f"model '{p}': not an .onnx, .prototxt or .ts.json file",
                        hint="give an ONNX model (.onnx), a Caffe net (.prototxt, with --weights W for its "
                             ".caffemodel) or a TorchScript-json export (.ts.json)")
    return DemoModel(name, fw, p, Path(weights) if weights else None, note=str(p))


def _prepare_weights(m: DemoModel, out: Path, seed: int, input_shapes: dict[str, Any] | None) -> None:
    """A Caffe model without weights gets random ones with a fixed seed."""
    if m.framework != "caffe" or m.weights is not None:
        return
    from ..tools.caffe_weights import write_random_weights

    path = out / f"{m.name}.caffemodel"
    if write_random_weights(m.path, path, seed=seed, input_shapes=input_shapes):  # type: ignore[arg-type]
        m.weights = path
        m.note += f"; random weights (seed {seed}) in {m.weights}"
    else:  # no layer has weights: a caffemodel without layers is not a valid file to read
        path.unlink(missing_ok=True)


def _print_next(console: Any, out: Path, given: list[DemoModel] | None) -> None:
    """The commands to try next on the files written: the bundled models', or (``given``: the
    given models that compiled) the first given model's."""
    if given is None:
        if (out / "small_cnn.obprog").is_file():
            console.print(f"next, on these files:\n  opbridge show {out / 'small_cnn.obir'}\n"
                          f"  opbridge profile {out / 'small_cnn.obprog'} --trace trace.json\n"
                          f"  opbridge validate {out / 'fire_net.prototxt'} --weights "
                          f"{out / 'fire_net.caffemodel'} --html report.html", highlight=False, soft_wrap=True)
        return
    m = next((m for m in given if m.path is not None), None)
    if m is None:
        return
    weights = f" --weights {m.weights}" if m.weights is not None else ""
    console.print(f"next, on these files:\n  opbridge show {out / f'{m.name}.obir'}\n"
                  f"  opbridge profile {out / f'{m.name}.obprog'} --trace trace.json\n"
                  f"  opbridge validate {m.path}{weights} --html report.html", highlight=False, soft_wrap=True)


def run_one(m: DemoModel, args: argparse.Namespace, out: Path, console: Any, res: DemoResult) -> None:
    """Every stage for one model; prints as it goes and records the outcome in ``res``."""
    import numpy as np

    from ..validate.api import validate_graph
    from ..validate.inputs import make_inputs
    from ..validate.progress import Stages

    console.rule(f"[bold]{m.name}[/] ({m.framework})")
    if m.note:
        console.print(m.note, highlight=False)
    if m.missing:
        console.print(f"[yellow]skipped:[/] {m.missing}")
        res.stages["convert"] = "skipped"
        return
    shapes = dict(args.input_shape) or None
    with Stages(True, 4, title=m.name) as stages:
        with stages.stage("preparing weights"):
            _prepare_weights(m, out, args.seed, shapes)
        with stages.stage("converting"):
            from ..convert import convert
            from ..ir.io import save

            graph = convert(str(m.path), weights=str(m.weights) if m.weights else None,
                            plugins=args.plugin, input_shapes=shapes, passes=passes_from_args(args),
                            input_values=input_values_from_args(args))
            obir = out / f"{m.name}.obir"
            save(graph, obir)
        res.stages["convert"] = "ok"
        console.print(f"converted: {len(graph.nodes)} IR nodes ({_op_summary(graph)}); wrote {obir}",
                      highlight=False)
        feeds, where = make_inputs(graph, seed=args.seed)
        program = None
        if _have("opbridge.simulator"):
            from ..simulator import compile as sim_compile

            res.current = "compile"
            with stages.stage(f"compiling for {args.target}"):
                program = sim_compile(graph, target=args.target)
                obprog = out / f"{m.name}.obprog"
                program.save(obprog)
            res.stages["compile"] = "ok"
            res.current = "run"
            with stages.stage("running on the simulator"):
                outs = program.run(feeds)
            res.stages["run"] = "ok"
            console.print(f"compiled for {args.target}; wrote {obprog}", highlight=False)
            for name, arr in outs.items():
                top = np.argsort(arr.reshape(arr.shape[0], -1)[0])[::-1][:3] if arr.ndim else []
                console.print(f"simulator output {name}: {arr.dtype}{list(arr.shape)}; top-3 indices "
                              f"of sample 0: {list(map(int, top))}", highlight=False)
        else:
            console.print("[yellow]skipped compile and run:[/] this opbridge has no simulator")
        res.current = "validate"
        report = validate_graph(graph, feeds, framework=m.framework, source=str(m.path),
                                weights=str(m.weights) if m.weights else None,
                                label=f"{m.name} ({m.path.name})" if m.path else m.name, target=args.target,
                                program=program, inputs_desc=where, stages=stages)
    report.print(console, max_rows=args.max_rows)
    res.stages["validate"] = "pass" if report.passed else "FAIL"
    res.passed = report.passed
    res.reference = report.reference
    report.write_json(out / f"{m.name}.validate.json")
    if program is not None:
        res.latency_ms = _print_profile(program, out / f"{m.name}.trace.json", console)


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _op_summary(graph: Any) -> str:
    counts = graph.op_counts()
    return ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())


def _print_profile(program: Any, trace: Path, console: Any) -> float:
    """Print the profile summary, write the timeline; returns the estimated latency (ms)."""
    p = program.profile()
    p.write_trace(trace)
    console.print(
        f"profile: estimated latency {p.est_latency_ms:.3f} ms; GDMA {p.gdma_bytes / 2**20:.2f} MiB; "
        f"local memory peak {p.lmem_peak_bytes / 1024:.1f} KiB/lane; {p.num_layer_groups} layer "
        f"groups, {p.num_tiles} tiles, {p.num_global_layers} global layers, {p.num_cpu_layers} host "
        f"ops; timeline in {trace}", highlight=False)
    return float(p.est_latency_ms)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..plugins_loader import load_plugins
    from . import EXIT_FAILED, EXIT_OK, EXIT_USAGE

    if args.weights and len(args.models) != 1:
        raise DemoError("--weights needs exactly one MODEL",
                        hint="run one Caffe MODEL at a time with its --weights, or leave --weights out (a "
                             "prototxt then gets random weights)")
    load_plugins(args.plugin)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    console = Console(width=150 if not sys.stdout.isatty() else None)
    models = ([given_model(s, args.weights) for s in args.models] if args.models
              else bundled_models(out, args.seed))
    results = []
    for m in models:
        res = DemoResult(m.name)
        results.append(res)
        try:
            run_one(m, args, out, console, res)
        except OpbridgeError as err:  # report it, go on with the next model
            res.stages[res.current] = "error"
            res.error = err.message
            console.print(f"[bold red]error:[/] {_esc(err.message)}", highlight=False)
            if err.hint:
                console.print(f"hint: {_esc(err.hint)}", highlight=False)
    t = Table(title="opbridge demo", title_justify="left")
    for col in ("model", "convert", "compile", "run", "validate", "against", "est. latency"):
        t.add_column(col)
    for r in results:
        t.add_row(r.name, *(r.stages.get(k, "skipped") for k in ("convert", "compile", "run", "validate")),
                  r.reference or "-", f"{r.latency_ms:.3f} ms" if r.latency_ms is not None else "-")
    console.rule()
    console.print(t)
    console.print(f"files in {out}/", highlight=False)
    _print_next(console, out, [m for m, r in zip(models, results) if r.stages.get("compile") == "ok"]
                if args.models else None)
    if any(r.error for r in results):
        return EXIT_USAGE
    ran = [r for r in results if r.passed is not None]
    return EXIT_OK if ran and all(r.passed for r in ran) else EXIT_FAILED
