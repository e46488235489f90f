"""``ob.validate``: run a model through the origin framework, the interpreter and the simulator,
and compare every tensor matched by its origin name."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OpbridgeError
from ..ir.graph import Graph
from ..renamed import renamed_keyword
from ..threads import threads_env
from .compare import compare, parse_tolerance, tolerance_for
from .inputs import ImageSpec, make_inputs, named_array_shapes
from .normalize import normalizer_for
from .progress import Stages
from .report import Report, Row
from .runners import (
    OriginRunError,
    RunOutput,
    compile_available,
    compile_program,
    detect_framework,
    origin_runner_name,
    resolve_target,
    run_interpreter,
    run_onnxruntime,
    run_opencv_caffe,
    run_simulator,
)


class ValidateError(OpbridgeError, ValueError):
    """Validation was asked for something it cannot do (nothing to compare, unknown file)."""


def load_graph(
    model: str | os.PathLike[str] | Graph,
    weights: str | None = None,
    plugins: Sequence[str] = (),
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    unfused: bool = False,
    input_values: Mapping[str, Any] | None = None,
) -> tuple[Graph, str]:
    """The IR graph of ``model`` (converted, or loaded from .obir) and its framework name;
    ``unfused``: converted without any pass."""
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
    if unfused:
        kwargs["passes"] = ()
    if weights is not None:
        kwargs["weights"] = weights
    if input_shapes:
        kwargs["input_shapes"] = dict(input_shapes)
    if input_values:
        kwargs["input_values"] = dict(input_values)
    return convert(path, **kwargs), framework


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
    dump_layers: str | None = None,
    origin: bool = True,
    progress: bool = False,
    passes: Sequence[str] = (),
    per_layer: bool = False,
    quantize: Any = None,
    input_values: Mapping[str, Any] | None = None,
    threads: int | None = None,
    dump: str | None = None,
) -> Report:
    """Validate ``model`` layer by layer; returns a :class:`Report` (``passed``, ``first_divergence``,
    ``rows``).

    ``model`` is a model file (ONNX, Caffe prototxt with ``weights``, TorchScript-json), an
    ``.obir`` file or a Graph. ``inputs`` maps input names to arrays; ``input_files`` takes
    ``NAME=FILE.npy`` specs, ``image`` an image for a 3-channel input; other inputs are random
    (``seed``). The origin framework (onnxruntime for ONNX, OpenCV's cv2.dnn for Caffe, torch for
    TorchScript-json), when installed and ``origin`` is true, is the reference; otherwise the
    interpreter is. ``target=None`` skips the simulator.
    ``tolerance`` is ``(cosine, euclid)``; None means the per-dtype defaults (0.99, 0.99 for f32).
    ``stop_after`` stops the interpreter after that node (origin or IR name) and compares what
    was computed; ``dump_layers`` (``--dump-layers FILE.npz``) writes every node's inputs and
    outputs, as the interpreter ran them, to that npz (``dump=``, its former name, still works
    with a DeprecationWarning).
    ``passes``, when given, replace the default IR passes as in ``convert`` (``--pass NAME`` gives
    ``opbridge.ir.passes.with_passes([NAME])``); each is checked against the graph before them
    (:mod:`opbridge.passcheck`: the report's notes and errors say how they did), and the origin
    framework runs the unfused model.
    ``per_layer`` compiles a debugging variant for the simulator in which every layer's output
    is stored to DDR, so layers inside a layer group are compared too (the first divergence
    then names the layer whose inputs agree and whose output does not).
    ``quantize`` (a calibration table or its path) compares the model quantized to int8 with
    the float model instead, both in the interpreter (:mod:`.quantized`).
    ``input_values`` binds inputs to constants as ``convert`` does; the origin framework is fed
    the same values. ``threads`` (``--threads N``): the BLAS threads of every interpreter and
    simulator run it makes (None: ``OPBRIDGE_NUM_THREADS``, else 1; 0: BLAS's own setting)."""
    from ..plugins_loader import load_plugins

    dump_layers = renamed_keyword("validate", ("dump_layers", dump_layers), ("dump", dump),
                                  cli="--dump-layers", error=ValidateError)
    tol = parse_tolerance(tolerance)
    load_plugins(list(plugins))
    label = model.name if isinstance(model, Graph) else str(model)
    if input_shapes is None and not isinstance(model, Graph):
        input_shapes = _shapes_for_symbolic_inputs(str(model), named_array_shapes(inputs, input_files))
    with threads_env(threads, "threads"), Stages(progress, 2, title=Path(label).name) as stages:
        with stages.stage("converting"):
            graph, framework = load_graph(model, weights, plugins, input_shapes, unfused=bool(passes),
                                          input_values=input_values)
        with stages.stage("preparing inputs"):
            feeds, where = make_inputs(graph, inputs, input_files, image, seed)
        if quantize is not None:
            from .quantized import validate_quantized

            with stages.stage("quantizing and comparing"):
                return validate_quantized(graph, quantize, feeds, framework=framework, label=label,
                                          tolerance=tolerance, inputs_desc=where)
        graph, check = _checked_passes(graph, passes, feeds, stages)
        origin_path = None if isinstance(model, Graph) or not origin else str(model)
        bound = _bound_values(str(model), weights, input_values) if origin_path and input_values else None
        report = validate_graph(graph, feeds, framework=framework, source=origin_path, weights=weights,
                                label=label, tolerance=tol, target=target, stop_after=stop_after,
                                dump_layers=dump_layers, inputs_desc=where, stages=stages,
                                per_layer=per_layer, bound=bound)
        if check is not None:
            check.add_to(report)
        return report


def _checked_passes(graph: Graph, passes: Sequence[str], feeds: Mapping[str, np.ndarray],
                    stages: Stages) -> tuple[Graph, Any]:
    """The graph after ``passes``, each checked against the graph before it, and the check
    (None without passes)."""
    if not passes:
        return graph, None
    from ..passcheck import check_passes

    stages.add(1)
    with stages.stage("running and checking the passes"):
        return check_passes(graph, passes, feeds=feeds)


def _shapes_for_symbolic_inputs(
    path: str, shapes: Mapping[str, tuple[int, ...]]
) -> dict[str, tuple[int, ...]] | None:
    """For an ONNX model whose inputs have symbolic dims, the shapes of the arrays given for them
    (so ``--input x=batch4.npy`` needs no ``--input-shape``); None when there is nothing to fix."""
    if not shapes or detect_framework(path) != "onnx":
        return None
    import onnx

    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:  # the converter reports an unreadable file properly
        return None
    inits = {t.name for t in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in inits]
    if "" in shapes and len(inputs) == 1:  # a bare FILE.npy feeds the only input
        shapes = {inputs[0].name: shapes[""], **shapes}
    fixed = {}
    for vi in inputs:
        dims = vi.type.tensor_type.shape.dim
        symbolic = any(d.HasField("dim_param") or not d.HasField("dim_value") for d in dims)
        if symbolic and vi.name in shapes and len(shapes[vi.name]) == len(dims):
            fixed[vi.name] = tuple(int(d) for d in shapes[vi.name])
    return fixed or None


def _bound_values(path: str, weights: str | None, values: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``values`` as the origin model's inputs declare them (its dtype and shape)."""
    from ..convert import bind_input_values, parse

    return bind_input_values(parse(path, weights=weights), values)


def validate_graph(
    graph: Graph,
    feeds: Mapping[str, np.ndarray],
    *,
    framework: str = "opbridge",
    source: str | None = None,
    weights: str | None = None,
    label: str | None = None,
    tolerance: tuple[float, float] | None = None,
    target: str | None = "bm1684",
    program: Any = None,
    stop_after: str | None = None,
    dump_layers: str | None = None,
    inputs_desc: Mapping[str, str] | None = None,
    stages: Stages | None = None,
    per_layer: bool = False,
    bound: Mapping[str, np.ndarray] | None = None,
    dump: str | None = None,
) -> Report:
    """Validate an already converted ``graph`` on ``feeds``.

    ``source`` is the origin model file to run in its framework (None: the interpreter is the
    reference), with ``weights`` for Caffe; ``program`` a Program already compiled from ``graph``
    (else compiled for ``target`` when the simulator exists; ``target=None`` skips it);
    ``per_layer``: see :func:`validate` (a given ``program`` is then compiled again, for its
    target, in the per-layer variant). ``bound``: the values of inputs bound to constants when
    converting (``input_values``), fed to the origin framework too; ``stop_after``,
    ``dump_layers``: as for :func:`validate`."""
    dump_layers = renamed_keyword("validate_graph", ("dump_layers", dump_layers), ("dump", dump),
                                  cli="--dump-layers", error=ValidateError)
    stages = stages or Stages(False, 0)
    origin_name = origin_runner_name(framework) if source else None
    simulate = (program is not None or (target is not None and compile_available())) and stop_after is None
    tgt = resolve_target(target) if simulate and program is None else None
    stages.add(2 + (origin_name is not None) + 2 * simulate)
    notes: list[str] = []
    errors: list[str] = []
    runs: list[RunOutput] = []
    # the interpreter runs first: its values of custom ops feed the origin framework
    with stages.stage("running the reference interpreter"):
        interp = run_interpreter(graph, feeds, stop_after=stop_after, dump_layers=dump_layers)
    origin_run = _run_origin(origin_name, framework, source, weights, {**feeds, **(bound or {})},
                             stages, notes, interp.tensors)
    runs += [origin_run, interp] if origin_run is not None else [interp]
    if simulate:
        try:
            runs.append(_run_simulated(graph, feeds, target, tgt, program, stages, per_layer))
        except OpbridgeError as err:
            if origin_run is None:  # the simulator was the only thing to compare: its error is the answer
                raise
            errors.append(f"simulator ({target}): {err.message}")
    elif target is not None and stop_after is not None:
        notes.append("simulator: skipped because --stop-after is set")
    elif target is not None:
        notes.append("simulator: not available in this opbridge (no opbridge.simulator.compile)")
    if per_layer and not simulate:
        notes.append("per-layer: no effect, the simulator did not run")
    with stages.stage("comparing"):
        report = build_report(label or graph.name, framework, graph, runs, tolerance)
    report.mode = _mode(simulate, per_layer)
    for r in runs:
        notes.extend(r.notes)
    report.notes[:0] = notes
    report.errors.extend(errors)
    report.inputs = dict(inputs_desc or {})
    if len(runs) < 2 and not errors:
        raise ValidateError(
            f"nothing to compare for '{report.model}': only the {runs[0].runner} ran",
            hint="install onnxruntime (ONNX models) or use a target the simulator supports",
        )
    return report


def _run_origin(
    origin_name: str | None,
    framework: str,
    source: str | None,
    weights: str | None,
    feeds: Mapping[str, np.ndarray],
    stages: Stages,
    notes: list[str],
    interpreted: Mapping[str, np.ndarray],
) -> RunOutput | None:
    """Run ``source`` in its origin framework (``origin_name``'s runner), or None.

    None when there is no source, its framework's runtime is not installed, or it failed to
    run; ``notes`` then says why the interpreter is the reference instead. ``interpreted``
    (the interpreter's tensors) stands in for the ops the framework cannot run.
    """
    if source is not None and origin_name in _ORIGIN_STAGES:
        with stages.stage(_ORIGIN_STAGES[origin_name]):
            try:
                return _origin_run(origin_name, source, weights, feeds, interpreted)
            except OriginRunError as err:
                notes.append(f"{err.message}; the interpreter is the reference")
                return None
    if framework == "caffe":
        notes.append("caffe: OpenCV (cv2.dnn) is not installed; the interpreter is the reference")
    elif framework == "torchscript":
        notes.append("torchscript: torch is not installed (pip install 'opbridge[torch]'); the "
                     "interpreter is the reference")
    elif framework == "onnx" and source is not None:
        notes.append("onnxruntime is not installed (pip install 'opbridge[validate]'); the "
                     "interpreter is the reference")
    return None


#: origin runner name -> the title of its progress stage.
_ORIGIN_STAGES = {"onnxruntime": "running onnxruntime", "opencv": "running OpenCV (cv2.dnn)",
                  "torch": "running torch"}


def _origin_run(origin_name: str, source: str, weights: str | None,
                feeds: Mapping[str, np.ndarray], interpreted: Mapping[str, np.ndarray]) -> RunOutput:
    if origin_name == "onnxruntime":
        return run_onnxruntime(source, feeds, custom_values=interpreted)
    if origin_name == "opencv":
        return run_opencv_caffe(source, weights, feeds, custom_values=interpreted)
    from .torch_runner import run_torch_json

    return run_torch_json(source, feeds)


def _run_simulated(graph: Graph, feeds: Mapping[str, np.ndarray], target: str | None, tgt: Any,
                   program: Any, stages: Stages, per_layer: bool) -> RunOutput:
    """Run ``program`` on the simulator, compiling ``graph`` for ``tgt`` (resolved from ``target``)
    first when it is None (or, for ``per_layer``, again for its target in that variant)."""
    kernels = None
    if per_layer and program is not None:
        tgt, kernels, program = program.target, getattr(program, "kernels", None), None
    if program is None:
        variant = " (per-layer debugging variant)" if per_layer else ""
        with stages.stage(f"compiling for {target}{variant}"):
            program = compile_program(graph, tgt, per_layer=per_layer, kernels=kernels)
    with stages.stage("running the simulator"):
        return run_simulator(program, feeds, per_layer=per_layer)


def _mode(simulated: bool, per_layer: bool) -> str:
    """The report's mode: how much of the simulator's work was compared."""
    if not simulated:
        return "no-simulator"
    return "per-layer" if per_layer else "layer-groups"


def build_report(
    model: str,
    framework: str,
    graph: Graph,
    runs: Sequence[RunOutput],
    tolerance: tuple[float, float] | None,
) -> Report:
    """Compare every run after the first with the first, tensor by tensor in execution order.

    A tensor the first run (the origin framework) lacks — a custom op's output it was fed, a
    layer it could not run, an intermediate it did not expose — is compared against the
    interpreter instead, so the simulator is still checked there; the notes name those layers.
    """
    ref = runs[0]
    fallback = next((r for r in runs[1:] if r.runner == "interpreter"), None) if ref.runner != "interpreter" else None
    outputs = {v.name for v in graph.outputs}
    rows: list[Row] = []
    matched = 0
    notes: list[str] = []
    unreferenced: list[str] = []
    for node in graph.nodes:
        for v in node.outputs:
            base = ref if v.name in ref.tensors else fallback
            if base is None or v.name not in base.tensors:
                continue
            cands = [c for c in runs[1:] if c is not base]
            new = _compare_tensor(node, v, base, cands, tolerance, v.name in outputs)
            rows += new
            if base is ref:
                matched += bool(new)
            elif new and node.origin.name not in unreferenced:
                unreferenced.append(node.origin.name)
            norm = normalizer_for(node.op, tuple(v.shape))
            if new and norm is not None:
                notes.append(f"'{v.name}' ({node.op}) {norm[1]}")
    report = Report(model, framework, [r.runner for r in runs], tolerance, rows, notes=notes,
                    graph=graph, program=next((r.extra["program"] for r in runs if "program" in r.extra), None))
    if ref.runner != "interpreter":
        report.notes.append(f"matched {matched} of {len(ref.tensors)} {ref.runner} tensors by name")
        report.unreferenced = unreferenced
        if unreferenced:
            shown = ", ".join(f"'{n}'" for n in unreferenced[:8])
            more = f" and {len(unreferenced) - 8} more" if len(unreferenced) > 8 else ""
            report.notes.append(f"{len(unreferenced)} layer(s) had no {ref.runner} reference and were "
                                f"compared against the interpreter: {shown}{more}")
    return report


def _compare_tensor(node: Any, v: Any, ref: RunOutput, cands: Sequence[RunOutput],
                    tolerance: tuple[float, float] | None, is_output: bool) -> list[Row]:
    """The rows comparing ``v`` (an output of ``node``) in each candidate run with ``ref``."""
    a = ref.tensors[v.name]
    norm = normalizer_for(node.op, tuple(v.shape))
    tol = tolerance_for(v.dtype, tolerance) if _ir_dtype_matches(a, v.dtype) else tolerance
    reads = tuple(x.name for x in node.inputs if x is not None and not x.is_constant)
    rows = []
    for c in cands:
        if v.name not in c.tensors:
            continue
        b = c.tensors[v.name]
        res = compare(norm[0](a), norm[0](b), tol) if norm else compare(a, b, tol)
        rows.append(Row(v.name, node.origin.name, node.origin.op_type, ref.runner, c.runner, res,
                        is_output=is_output, inputs=reads))
    return rows


def _ir_dtype_matches(arr: np.ndarray, dtype: str) -> bool:
    from ..ir.types import to_numpy_dtype

    return np.asarray(arr).dtype == to_numpy_dtype(dtype)
