"""``ob.validate``: run a model through the origin framework, the interpreter and the simulator,
and compare every tensor matched by its origin name."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OpbridgeError
from ..ir.graph import Graph
from .compare import compare, parse_tolerance, tolerance_for
from .inputs import ImageSpec, make_inputs
from .report import Report, Row
from .runners import (
    OriginRunError,
    RunOutput,
    compile_available,
    compile_program,
    detect_framework,
    origin_runner_name,
    run_interpreter,
    run_onnxruntime,
    run_simulator,
)


class ValidateError(OpbridgeError, ValueError):
    """Validation was asked for something it cannot do (nothing to compare, unknown file)."""


def load_graph(
    model: str | os.PathLike[str] | Graph,
    weights: str | None = None,
    plugins: Sequence[str] = (),
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> tuple[Graph, str]:
    """The IR graph of ``model`` (converted, or loaded from .obir) and its framework name."""
    if isinstance(model, Graph):
        return model, "opbridge"
    path = str(model)
    framework = detect_framework(path)
    if framework == "obir":
        from ..ir.io import load

        return load(path), "opbridge"
    try:
        from ..convert import convert
    except ImportError:
        raise ValidateError(
            f"cannot convert '{path}': this opbridge has no converter (opbridge.convert)",
            hint="validate an .obir file, or a Graph from Python",
        ) from None
    kwargs: dict[str, Any] = {"plugins": list(plugins)}
    if weights is not None:
        kwargs["weights"] = weights
    if input_shapes:
        kwargs["input_shapes"] = dict(input_shapes)
    return convert(path, **kwargs), framework


class _Stages:
    """A rich progress bar over validation's stages, on stderr, only where it is a terminal."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.progress: Any = None
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            console = Console(stderr=True)
            if console.is_terminal:
                self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                         TimeElapsedColumn(), console=console, transient=True)
                self.progress.start()
                self.task = self.progress.add_task("validate", total=total)

    @contextlib.contextmanager
    def stage(self, text: str) -> Iterator[None]:
        if self.progress is not None:
            self.progress.update(self.task, description=text)
        try:
            yield
        finally:
            if self.progress is not None:
                self.progress.advance(self.task)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def validate(
    model: str | os.PathLike[str] | Graph,
    weights: str | None = None,
    inputs: Mapping[str, Any] | None = None,
    plugins: Sequence[str] = (),
    tolerance: tuple[float, float] | str | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    target: str | None = "bm1684",
    *,
    input_files: Sequence[str] = (),
    image: ImageSpec | None = None,
    seed: int = 0,
    stop_after: str | None = None,
    dump: str | None = None,
    origin: bool = True,
    progress: bool = False,
) -> Report:
    """Validate ``model`` layer by layer; returns a :class:`Report` (``passed``, ``first_divergence``,
    ``rows``).

    ``model`` is a model file (ONNX, Caffe prototxt with ``weights``, TorchScript-json), an
    ``.obir`` file or a Graph. ``inputs`` maps input names to arrays; ``input_files`` takes
    ``NAME=FILE.npy`` specs, ``image`` an image for a 3-channel input; other inputs are random
    (``seed``). The origin framework (onnxruntime for ONNX), when installed and ``origin`` is
    true, is the reference; otherwise the interpreter is. ``target=None`` skips the simulator.
    ``tolerance`` is ``(cosine, euclid)``; None means the per-dtype defaults (0.99, 0.99 for f32).
    ``stop_after`` stops the interpreter after that node (origin or IR name) and compares what
    was computed; ``dump`` writes every node's inputs and outputs to an npz.
    """
    from ..plugins_loader import load_plugins

    tol = parse_tolerance(tolerance)
    load_plugins(list(plugins))
    framework = detect_framework(model) if not isinstance(model, Graph) else "opbridge"
    origin_name = origin_runner_name(framework) if origin else None
    simulate = target is not None and stop_after is None and compile_available()
    stages = _Stages(progress, 3 + (origin_name is not None) + 2 * simulate)
    notes: list[str] = []
    try:
        with stages.stage(f"converting {Path(str(model)).name if not isinstance(model, Graph) else model.name}"):
            graph, framework = load_graph(model, weights, plugins, input_shapes)
        with stages.stage("preparing inputs"):
            feeds, where = make_inputs(graph, inputs, input_files, image, seed)
        runs: list[RunOutput] = []
        if origin_name == "onnxruntime":
            with stages.stage("running onnxruntime"):
                try:
                    runs.append(run_onnxruntime(str(model), feeds))
                except OriginRunError as err:
                    notes.append(f"{err.message}; the interpreter is the reference")
        elif framework == "caffe":
            notes.append("caffe: no origin framework to run; the interpreter is the reference")
        elif framework == "torchscript":
            notes.append("torchscript: the JSON graph has no runner of its own; the interpreter is "
                         "the reference")
        elif framework == "onnx" and origin:
            notes.append("onnxruntime is not installed (pip install 'opbridge[validate]'); the "
                         "interpreter is the reference")
        with stages.stage("running the reference interpreter"):
            runs.append(run_interpreter(graph, feeds, stop_after=stop_after, dump=dump))
        errors: list[str] = []
        if simulate:
            try:
                with stages.stage(f"compiling for {target}"):
                    program = compile_program(graph, target)
                with stages.stage("running the simulator"):
                    runs.append(run_simulator(program, feeds))
            except OpbridgeError as err:
                errors.append(f"simulator ({target}): {err.message}")
        elif target is not None and stop_after is not None:
            notes.append("simulator: skipped because --stop-after is set")
        elif target is not None:
            notes.append("simulator: not available in this opbridge (no opbridge.simulator.compile)")
        with stages.stage("comparing"):
            report = build_report(str(model) if not isinstance(model, Graph) else graph.name,
                                  framework, graph, runs, tol)
    finally:
        stages.close()
    for r in runs:
        notes.extend(r.notes)
    report.notes[:0] = notes
    report.errors.extend(errors)
    report.inputs = where
    if len(runs) < 2 and not errors:
        raise ValidateError(
            f"nothing to compare for '{report.model}': only the {runs[0].runner} ran",
            hint="install onnxruntime (ONNX models) or use a target the simulator supports",
        )
    return report


def build_report(
    model: str,
    framework: str,
    graph: Graph,
    runs: Sequence[RunOutput],
    tolerance: tuple[float, float] | None,
) -> Report:
    """Compare every run after the first with the first, tensor by tensor in execution order."""
    ref, cands = runs[0], runs[1:]
    outputs = {v.name for v in graph.outputs}
    rows: list[Row] = []
    matched = 0
    for node in graph.nodes:
        for v in node.outputs:
            if v.name not in ref.tensors:
                continue
            a = ref.tensors[v.name]
            hit = False
            for c in cands:
                if v.name not in c.tensors:
                    continue
                hit = True
                res = compare(a, c.tensors[v.name], tolerance_for(v.dtype, tolerance)
                              if _ir_dtype_matches(a, v.dtype) else tolerance)
                rows.append(Row(v.name, node.origin.name, node.origin.op_type, ref.runner, c.runner,
                                res, is_output=v.name in outputs))
            matched += hit
    report = Report(model, framework, [r.runner for r in runs], tolerance, rows)
    if ref.runner == "onnxruntime":
        report.notes.append(f"matched {matched} of {len(ref.tensors)} onnxruntime tensors by name")
    return report


def _ir_dtype_matches(arr: np.ndarray, dtype: str) -> bool:
    from ..ir.types import to_numpy_dtype

    return np.asarray(arr).dtype == to_numpy_dtype(dtype)
