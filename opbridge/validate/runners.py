"""The ways validation runs a model: the origin framework, the reference interpreter, the simulator.

Each runner returns a dict of tensor name -> array. Names are the origin model's tensor names:
the converter names IR values after them, so the three runners can be matched name by name.
"""

from __future__ import annotations

import inspect
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OpbridgeError, first_line
from ..ir.graph import Graph

#: The highest ONNX IR version the onnxruntime releases we support accept; newer models are
#: run with this version stamped on a copy (the opsets, which carry the semantics, are kept).
ORT_MAX_IR_VERSION = 10
#: A serialized protobuf message must stay under 2 GiB.
PROTOBUF_LIMIT = (1 << 31) - 1
#: How much of a reference runtime's error line a message quotes (onnxruntime's may run on).
_ERROR_CHARS = 300


class OriginRunError(OpbridgeError, RuntimeError):
    """The origin framework could not run the model (the interpreter then is the reference)."""


@dataclass
class RunOutput:
    """What one runner produced."""

    runner: str
    tensors: dict[str, np.ndarray]
    #: True when only the graph outputs are available (no intermediate tensors)
    outputs_only: bool = False
    notes: list[str] = field(default_factory=list)
    #: runner-specific extras (the simulator's Program)
    extra: dict[str, Any] = field(default_factory=dict)


def detect_framework(path: str | Path) -> str:
    """``onnx``, ``caffe`` or ``torchscript`` from a model file's name."""
    name = str(path).lower()
    if name.endswith(".onnx"):
        return "onnx"
    if name.endswith(".prototxt"):
        return "caffe"
    if name.endswith(".ts.json"):
        return "torchscript"
    if name.endswith(".obir"):
        return "obir"
    return "unknown"


def origin_runner_name(framework: str) -> str | None:
    """The name of the origin runner for a framework if one is installed, else None."""
    import importlib.util

    if framework == "onnx" and importlib.util.find_spec("onnxruntime") is not None:
        return "onnxruntime"
    if framework == "caffe" and importlib.util.find_spec("cv2") is not None:
        return "opencv"
    if framework == "torchscript" and importlib.util.find_spec("torch") is not None:
        return "torch"
    return None


def run_onnxruntime(path: str | Path, feeds: Mapping[str, np.ndarray], *, intermediates: bool = True,
                    custom_values: Mapping[str, np.ndarray] | None = None) -> RunOutput:
    """Run an ONNX file with onnxruntime; every top-level node output becomes a graph output
    on an in-memory copy so its value can be compared.

    ``custom_values`` (tensor name -> the interpreter's value) lets a model with ops onnxruntime
    cannot run (custom ops) run cut at them, fed with those values (see :mod:`.cut`)."""
    model, feeds, notes = _ort_model(path, feeds, custom_values)
    try:
        out = _ort_session_run(model, feeds, intermediates)
    except Exception as err:
        why = first_line(err, limit=_ERROR_CHARS)
        if not intermediates:
            raise OriginRunError(f"[onnx] '{path}': onnxruntime cannot run it: {why}") from err
        model, feeds, notes = _ort_model(path, feeds, custom_values)  # the copy was changed
        try:
            out = _ort_session_run(model, feeds, False)
        except Exception:
            raise OriginRunError(f"[onnx] '{path}': onnxruntime cannot run it: {why}") from err
        notes.append(f"onnxruntime: intermediate tensors unavailable ({why}); outputs only")
    out.notes[:0] = notes
    return out


def _ort_model(path: str | Path, feeds: Mapping[str, np.ndarray],
               custom_values: Mapping[str, np.ndarray] | None) -> tuple[Any, dict[str, np.ndarray], list[str]]:
    """The model onnxruntime runs (cut at custom ops when ``custom_values`` is given), its feeds
    and what the cut did."""
    import onnx

    try:
        model = onnx.load(str(path))
    except Exception as err:
        raise OriginRunError(f"[onnx] '{path}': onnx cannot load it: {err}") from err
    feeds = dict(feeds)
    notes: list[str] = []
    if custom_values is not None:
        from .cut import cut_model

        cut = cut_model(model, custom_values)
        if cut is not None:
            if not cut.kept:
                raise OriginRunError(f"[onnx] '{path}': onnxruntime can run none of its nodes "
                                     f"({cut.describe()})")
            feeds.update(cut.fed)
            notes.append(cut.describe())
    return model, feeds, notes


def _ort_session_run(model: Any, feeds: Mapping[str, np.ndarray], intermediates: bool) -> RunOutput:
    import onnx
    import onnxruntime as ort

    outputs = [o.name for o in model.graph.output]
    if intermediates:
        seen = set(outputs) | {i.name for i in model.graph.input}
        for node in model.graph.node:
            for name in node.output:
                if name and name not in seen:
                    seen.add(name)
                    model.graph.output.append(onnx.ValueInfoProto(name=name))
    if model.ir_version > ORT_MAX_IR_VERSION:
        model.ir_version = ORT_MAX_IR_VERSION
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    with tempfile.TemporaryDirectory(prefix="opbridge-validate-") as tmp:
        if model.ByteSize() < PROTOBUF_LIMIT:
            source: Any = model.SerializeToString()
        else:  # one protobuf message holds < 2 GiB: write the copy with external data
            source = str(Path(tmp) / "model.onnx")
            onnx.save(model, source, save_as_external_data=True, location="weights.bin")
        sess = ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    ins = {i.name for i in sess.get_inputs()}
    res = sess.run(names, {k: v for k, v in feeds.items() if k in ins})
    # sequences and maps (SequenceConstruct, ZipMap) have no IR tensor to compare with
    tensors = {n: a for n, a in zip(names, res) if isinstance(a, np.ndarray)}
    return RunOutput("onnxruntime", tensors, outputs_only=not intermediates)


def run_opencv_caffe(
    prototxt: str | Path, weights: str | Path | None, feeds: Mapping[str, np.ndarray],
    *, custom_values: Mapping[str, np.ndarray] | None = None,
) -> RunOutput:
    """Run a Caffe model with OpenCV's ``cv2.dnn`` (layer fusion off, so every layer's own output
    is kept); each layer's first top is returned under its SSA name in opbridge's origin graph.

    With ``custom_values`` (the interpreter's tensors), a layer type OpenCV cannot create runs as
    a stand-in that returns the interpreter's values of its tops (see :func:`.cut.standin_layer`),
    so OpenCV stays the reference for the other layers; the stand-ins' own tops are not returned."""
    import cv2

    from ..parsers.caffe import parse_caffe
    from .cut import missing_layer_type, standin_layer

    if weights is None:
        raise OriginRunError(f"[caffe] '{prototxt}': OpenCV needs the weights (.caffemodel)")
    origin = parse_caffe(prototxt)
    standins: list[str] = []
    try:
        while True:
            try:
                nodes, outs = _opencv_forward(prototxt, weights, feeds, origin, standins)
                break
            except cv2.error as err:
                kind = missing_layer_type(str(err))
                layers = [n for n in origin.nodes if n.op_type == kind]
                if custom_values is None or not layers or kind in standins:
                    raise OriginRunError(f"[caffe] '{prototxt}': OpenCV cannot run it: "
                                         f"{first_line(err, limit=_ERROR_CHARS)}") from err
                cv2.dnn_registerLayer(kind, standin_layer(layers, custom_values))
                standins.append(str(kind))
    finally:
        for kind in standins:
            cv2.dnn_unregisterLayer(kind)
    out = RunOutput("opencv", {n.outputs[0]: np.asarray(o) for n, o in zip(nodes, outs)})
    if standins:
        names = [f"'{n.name}' ({n.op_type})" for n in origin.nodes if n.op_type in standins]
        out.notes.append(f"OpenCV cannot run the custom layer(s) {', '.join(names[:6])}: it ran them as "
                         f"stand-ins returning the interpreter's values of their tops")
    return out


def _opencv_forward(prototxt: str | Path, weights: str | Path, feeds: Mapping[str, np.ndarray],
                    origin: Any, standins: list[str]) -> tuple[list[Any], Any]:
    """Forward the net once; the origin nodes whose first tops were fetched, and their values."""
    import cv2

    net = cv2.dnn.readNetFromCaffe(str(prototxt), str(weights))
    net.enableFusion(False)
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    known = set(net.getLayerNames())
    # OpenCV 4.14 names some layers (convolutions) after their top rather than their own name
    label = {id(n): n.name if n.name in known else n.outputs[0] for n in origin.nodes if n.outputs}
    nodes = [n for n in origin.nodes if n.outputs and label[id(n)] in known and n.op_type not in standins]
    for name, arr in feeds.items():
        net.setInput(np.ascontiguousarray(arr), name)
    return nodes, net.forward([label[id(n)] for n in nodes])


def run_interpreter(
    graph: Graph,
    feeds: Mapping[str, np.ndarray],
    *,
    stop_after: str | None = None,
    dump_layers: str | None = None,
) -> RunOutput:
    """Run the IR reference interpreter, keeping every named tensor."""
    from ..ir.interpret import interpret

    tensors = interpret(graph, feeds, keep_intermediates=True, stop_after=stop_after, dump_layers=dump_layers)
    notes = [f"interpreter: stopped after node '{stop_after}'"] if stop_after else []
    env = os.environ.get("OPBRIDGE_DEBUG")
    if dump_layers is None and env and env != "0":
        dump_layers = env if env.endswith(".npz") else f"{graph.name}_debug.npz"
    if dump_layers:
        notes.append(f"interpreter: every node's inputs and outputs written to {dump_layers}")
    return RunOutput("interpreter", dict(tensors), notes=notes)


def compile_available() -> bool:
    """Whether the simulator's ``compile`` exists in this tree."""
    try:
        from ..simulator import compile as _compile  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_target(target: Any) -> Any:
    """A simulator Target from a preset name, a target JSON file or a Target; a wrong name is a
    user error raised before anything runs."""
    from ..simulator.target import resolve_target as resolve

    return resolve(target)


def compile_program(graph: Graph, target: Any, *, per_layer: bool = False, kernels: Any = None) -> Any:
    """Compile ``graph`` for the simulator; ``per_layer``: the debugging variant that stores
    every layer's output to DDR; ``kernels``: a KernelRegistry other than the default."""
    from ..simulator import compile as sim_compile

    if per_layer:
        return sim_compile(graph, target=target, kernels=kernels, per_layer=True)
    return sim_compile(graph, target=target, kernels=kernels)


def run_simulator(program: Any, feeds: Mapping[str, np.ndarray], *, per_layer: bool = False) -> RunOutput:
    """Run a compiled Program; intermediate tensors too if the simulator offers them
    (``per_layer``: the program is the per-layer variant, which stores every layer's output)."""
    params = inspect.signature(program.run).parameters
    if "keep_intermediates" in params:
        # what is compared (layer groups or every layer) is the report's mode, not a note
        tensors = program.run(dict(feeds), keep_intermediates=True)
        return RunOutput("simulator", dict(tensors), extra={"program": program})
    tensors = program.run(dict(feeds))
    return RunOutput("simulator", dict(tensors), outputs_only=True,
                     notes=["simulator: compared on graph outputs only (it does not expose "
                            "intermediate tensors)"],
                     extra={"program": program})
