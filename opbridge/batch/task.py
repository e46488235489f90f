"""The batch task: one model's bytes in, its verdict, figures and output files' bytes out.

:func:`run_task` sees nothing of the caller's filesystem: it writes the bytes it was sent into a
private temporary folder, works there and returns plain data, so the same function runs in a local
worker process or as a Ray remote task on another machine.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import OpbridgeError

Task = dict[str, Any]
TaskResult = dict[str, Any]


def run_task(task: Task) -> TaskResult:
    """Do ``task["mode"]`` to the model whose bytes ``task`` carries; return the verdict, figures
    and output files' bytes. Never raises for a model's fault: errors become the result."""
    t0 = time.perf_counter()
    base: TaskResult = {"name": task["name"], "weights": task.get("weights_source", "")}
    with tempfile.TemporaryDirectory(prefix="opbridge-batch-") as tmp:
        work = Path(tmp)
        try:
            model, weights, plugins = _materialise(task, work)
            base.update(_MODE_RUNNERS[task["mode"]](task, model, weights, plugins, work))
        except OpbridgeError as err:
            base.update(status="error", error_kind="user",
                        error=err.message + (f" (hint: {err.hint})" if err.hint else ""))
        except OSError as err:
            base.update(status="error", error_kind="user", error=f"{err.strerror or err}: {err.filename or ''}")
        except Exception as err:  # a bug of ours in one model must not stop the batch
            base.update(status="error", error_kind="internal",
                        error=f"internal error: {type(err).__name__}: {err}")
        if base.get("error"):  # name the caller's file, not this task's temporary copy
            base["error"] = (base["error"].replace(str(work / safe_file(task["model_name"])), task["name"])
                             .replace(str(work) + os.sep, ""))
    base.setdefault("figures", {})["time_s"] = round(time.perf_counter() - t0, 3)
    base.setdefault("outputs", {})
    return base


def _materialise(task: Task, work: Path) -> tuple[Path, str | None, list[str]]:
    """Write the task's files into ``work``; returns the model path, the weights path (random
    Caffe weights generated here when asked) and the plugin paths."""
    from ..plugins_loader import load_plugins

    # The caller sent its OPBRIDGE_PLUGIN_PATH plugins as bytes with the others: loading them
    # again from this worker's environment (inherited by local workers) would register twice.
    os.environ.pop("OPBRIDGE_PLUGIN_PATH", None)
    files = [_plugin_file(name, data, work) for name, data in task.get("plugins", ())]
    plugins = [str(path) for _, path in files]
    load_plugins(plugins)
    _plugin_paths.update(files)  # only once loaded: a plugin that failed is tried afresh next time
    model = work / safe_file(task["model_name"])
    model.write_bytes(task["model"])
    for name, data in task.get("companions", ()):
        (work / safe_file(name)).write_bytes(data)
    weights: str | None = None
    if task.get("weights") is not None:
        wname, wdata = task["weights"]
        weights = str(work / ("weights-" + safe_file(wname)))
        Path(weights).write_bytes(wdata)
    elif task.get("random_weights"):
        from ..tools.caffe_weights import write_random_weights

        weights = str(work / "random.caffemodel")
        write_random_weights(model, weights, seed=task.get("seed", 0),
                             input_shapes=task.get("input_shapes") or None, plugins=plugins)
    return model, weights, plugins


#: plugins this process has loaded: SHA-256 of their bytes -> the path they were loaded from
_plugin_paths: dict[str, Path] = {}


def _plugin_file(name: str, data: bytes, work: Path) -> tuple[str, Path]:
    """(hash, path) of a plugin's bytes: the path this process loaded them from before, else a
    new file in this task's private folder. Plugins are loaded once per resolved path, so reusing
    it keeps a worker that runs many tasks from registering a plugin twice; the file may be gone
    by then (a loaded plugin is not read again)."""
    digest = hashlib.sha256(data).hexdigest()
    if digest not in _plugin_paths:
        path = work / "plugins" / digest[:20] / safe_file(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return digest, path
    return digest, _plugin_paths[digest]


def _convert(task: Task, model: Path, weights: str | None, plugins: list[str], work: Path) -> Any:
    """Convert the model and save it as ``model.obir``; returns the graph."""
    from ..convert import convert
    from ..ir.io import save

    kwargs = {} if task.get("passes") is None else {"passes": task["passes"]}
    graph = convert(str(model), weights=weights, input_shapes=task.get("input_shapes") or None,
                    plugins=plugins, input_values=task.get("input_values") or None, **kwargs)
    save(graph, work / "model.obir")
    return graph


def _convert_figures(graph: Any) -> dict[str, Any]:
    return {"nodes": len(graph.nodes), "constants": len(graph.constants)}


def _task_convert(task: Task, model: Path, weights: str | None, plugins: list[str], work: Path) -> TaskResult:
    graph = _convert(task, model, weights, plugins, work)
    return {"status": "passed", "figures": _convert_figures(graph),
            "outputs": _read_outputs(work, ("model.obir",))}


def _target(task: Task) -> Any:
    """The task's simulator Target: the driver sends its fields (a preset name from an older
    driver is taken as it is)."""
    from ..simulator.target import Target

    t = task["target"]
    return Target.from_dict(t, where="the batch's target") if isinstance(t, dict) else t


def _task_compile(task: Task, model: Path, weights: str | None, plugins: list[str], work: Path) -> TaskResult:
    from ..simulator import compile
    from ..validate.html import profile_html

    graph = _convert(task, model, weights, plugins, work)
    t0 = time.perf_counter()
    program = compile(graph, _target(task))
    compile_s = time.perf_counter() - t0
    program.save(work / "model.obprog")
    (work / "profile.html").write_text(profile_html(program), encoding="utf-8")
    figures = {**_convert_figures(graph), **_program_figures(program), "compile_s": round(compile_s, 3)}
    return {"status": "passed", "figures": figures,
            "outputs": _read_outputs(work, ("model.obir", "model.obprog", "profile.html"))}


def _task_validate(task: Task, model: Path, weights: str | None, plugins: list[str], work: Path) -> TaskResult:
    from ..ir.io import save
    from ..validate import validate

    report = validate(str(model), weights=weights, plugins=plugins, tolerance=task.get("tolerance"),
                      input_shapes=task.get("input_shapes") or None, target=_target(task),
                      seed=task.get("seed", 0), passes=task.get("passes") or (),
                      input_values=task.get("input_values") or None)
    report.model = task["name"]  # the caller's path, not the task's temporary copy
    figures: dict[str, Any] = {"comparisons": len(report.rows), "failed": len(report.failures)}
    names = ["report.json", "report.html"]
    report.write_json(work / "report.json")
    report.write_html(work / "report.html")
    if report.graph is not None:
        save(report.graph, work / "model.obir")
        figures["nodes"] = len(report.graph.nodes)
        names.append("model.obir")
    if report.program is not None:
        report.program.save(work / "model.obprog")
        figures.update(_program_figures(report.program))
        names.append("model.obprog")
    fd = report.first_divergence
    result: TaskResult = {"status": "passed" if report.passed else "failed", "figures": figures,
                          "verdict": report.summary(), "first_divergence": str(fd) if fd else None,
                          "outputs": _read_outputs(work, names)}
    if report.errors:
        result["error"] = "; ".join(report.errors)
    return result


def _program_figures(program: Any) -> dict[str, Any]:
    prof = program.profile()
    return {"est_latency_ms": float(f"{prof.est_latency_ms:.6g}"), "layer_groups": prof.num_layer_groups,
            "cpu_layers": prof.num_cpu_layers, "gdma_bytes": int(prof.gdma_bytes)}


def _read_outputs(work: Path, names: Sequence[str]) -> dict[str, bytes]:
    return {name: (work / name).read_bytes() for name in names}


_MODE_RUNNERS: dict[str, Callable[[Task, Path, str | None, list[str], Path], TaskResult]] = {
    "validate": _task_validate, "convert": _task_convert, "compile": _task_compile,
}


def safe_file(name: str) -> str:
    """A file name with only letters, digits, '.', '_' and '-' (no separators, no leading dot)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).lstrip(".")
