"""The caller's side of a batch: models -> tasks -> a local pool or Ray -> files and a summary."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..convert import model_endings
from ..errors import OpbridgeError
from .task import Task, TaskResult, run_task, safe_file

#: the work a batch can do to each model
MODES = ("validate", "convert", "compile")
#: summary.json layout version
SUMMARY_VERSION = 1
EXIT_OK, EXIT_FAILED, EXIT_USER_ERROR, EXIT_INTERNAL_ERROR = 0, 1, 2, 3
#: the files a batch writes into its output folder (no model's folder may take these names)
RESERVED = ("summary.json", "summary.html")


class BatchError(OpbridgeError, ValueError):
    """A batch was asked for something it cannot do (unknown mode, no models, Ray missing)."""


@dataclass
class ModelResult:
    """One model's outcome in a batch."""

    name: str
    path: str
    #: the model's folder under the output directory
    dir: str
    #: ``passed``, ``failed`` (a validation out of tolerance) or ``error``
    status: str
    error: str | None = None
    #: ``user`` (an OpbridgeError or an unreadable file) or ``internal`` for an error
    error_kind: str | None = None
    verdict: str = ""
    first_divergence: str | None = None
    #: where a Caffe net's weights came from: ``given``, ``sibling``, ``random (seed N)``
    weights: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    #: output files written, relative to the output directory
    outputs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "dir": self.dir, "status": self.status,
                "passed": self.status == "passed", "error": self.error, "error_kind": self.error_kind,
                "verdict": self.verdict, "first_divergence": self.first_divergence,
                "weights": self.weights, "figures": dict(self.figures), "outputs": list(self.outputs)}


@dataclass
class BatchResult:
    """What :func:`batch` returns: one :class:`ModelResult` per model, in the order given."""

    mode: str
    output: str
    target: str
    executor: str
    models: list[ModelResult]
    wall_s: float = 0.0

    @property
    def passed(self) -> bool:
        return all(m.status == "passed" for m in self.models)

    @property
    def exit_code(self) -> int:
        """0 all passed, 1 a validation did not pass, 2 a user error, 3 an internal error (worst wins)."""
        code = EXIT_OK
        for m in self.models:
            if m.status == "failed":
                code = max(code, EXIT_FAILED)
            elif m.status == "error":
                code = max(code, EXIT_INTERNAL_ERROR if m.error_kind == "internal" else EXIT_USER_ERROR)
        return code

    def counts(self) -> dict[str, int]:
        return {s: sum(m.status == s for m in self.models) for s in ("passed", "failed", "error")}

    def to_dict(self) -> dict[str, Any]:
        return {"version": SUMMARY_VERSION, "mode": self.mode, "target": self.target,
                "executor": self.executor, "wall_s": round(self.wall_s, 3), "counts": self.counts(),
                "exit_code": self.exit_code, "models": [m.to_dict() for m in self.models]}

    def print(self, console: Any = None) -> None:
        """The summary table, then one line of counts (rich; colours where the terminal allows)."""
        from .summary import print_summary

        print_summary(self, console)


def batch(
    mode: str,
    models: Sequence[str | os.PathLike[str]],
    *,
    output: str | os.PathLike[str] = "opbridge-batch",
    jobs: int | None = None,
    ray: bool | str | None = None,
    weights: str | os.PathLike[str] | None = None,
    plugins: Sequence[str | os.PathLike[str]] = (),
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    target: str = "bm1684",
    seed: int = 0,
    tolerance: str | tuple[float, float] | None = None,
    progress: bool = False,
    passes: Sequence[str] | None = None,
    input_values: Mapping[str, Any] | None = None,
) -> BatchResult:
    """Validate, convert or compile every model in ``models`` (files, or folders searched for
    ``.onnx``/``.prototxt``/``.ts.json``/``.obir``) and write ``summary.json``, ``summary.html`` and
    each model's files under ``output/<safe-name>/``.

    ``jobs`` worker processes (default: min(CPUs, models)) run the models locally; ``ray=True``
    runs them as Ray tasks on a local ``ray.init()``, ``ray="ADDRESS"`` on that cluster.
    A Caffe prototxt takes ``weights`` only when it is the only model; otherwise its sibling
    ``NAME.caffemodel`` when present, else random weights (seeded by ``seed``).
    ``passes`` replace the default IR passes as in ``convert`` (``--pass NAME`` gives
    ``opbridge.ir.passes.with_passes([NAME])``); plugins register their own. ``input_values``
    binds inputs to constants in every model that has them, as ``convert`` does.
    """
    from .summary import write_summary

    if mode not in MODES:
        raise BatchError(f"unknown batch mode '{mode}'", hint=f"use one of: {', '.join(MODES)}")
    paths = expand_models(models)
    if weights is not None and len(paths) != 1:
        raise BatchError(f"--weights given for {len(paths)} models: it pairs with one model only",
                         hint="put each net's NAME.caffemodel beside its NAME.prototxt instead")
    t0 = time.perf_counter()
    out = _output_dir(output)
    names = safe_names(paths)
    fields = _check_options(mode, target, tolerance if mode == "validate" else None)
    common = _common_options(mode, plugins, input_shapes, target, seed, tolerance)
    # the target travels as its fields (a target .json file need not exist where a task runs)
    common["target"] = fields if fields is not None else target
    common["passes"] = list(passes) if passes is not None else None
    # plain lists and numbers: a task travels to worker processes and Ray nodes as data
    import numpy as np

    common["input_values"] = {k: np.asarray(v).tolist() for k, v in (input_values or {}).items()}
    tasks, early = _build_tasks(paths, weights, common)
    todo = [(i, t) for i, t in enumerate(tasks) if t is not None]
    executor = ("ray" if ray is True else f"ray at {ray}") if ray else f"local pool ({_jobs(jobs, len(todo))} jobs)"
    rows: dict[int, ModelResult] = {}
    with _Progress(progress, len(paths), f"batch {mode}") as bar:

        def on_done(i: int, res: TaskResult) -> None:
            # written as it arrives: the driver keeps no output bytes, and an interrupted batch
            # keeps the models that finished
            rows[i] = _store(out, names[i], str(paths[i]), res)
            bar.done(names[i], res["status"])

        for i, res in early.items():
            on_done(i, res)
        if todo and ray:
            _run_ray(todo, None if ray is True else str(ray), on_done)
        elif todo:
            _run_local(todo, _jobs(jobs, len(todo)), on_done)
    result = BatchResult(mode, str(out), target, executor, [rows[i] for i in range(len(paths))],
                         time.perf_counter() - t0)
    write_summary(result)
    return result


def _output_dir(output: str | os.PathLike[str]) -> Path:
    """The output folder, made now: a path that cannot be a folder fails before any model runs."""
    out = Path(output)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BatchError(f"output folder '{out}' cannot be made: {err.strerror or err}",
                         hint="give -o a folder path (new or existing), not a file or a path under one") from None
    return out


def _check_options(mode: str, target: str, tolerance: str | tuple[float, float] | None) -> dict[str, Any] | None:
    """Options every model shares are checked once, not failed once per model. Returns the
    target's fields (a preset name or a target .json file, read as ``opbridge validate`` reads
    ``--target``), or None in convert mode, which has no target."""
    from ..validate.compare import parse_tolerance
    from ..validate.runners import resolve_target

    parse_tolerance(tolerance)
    if mode == "convert":
        return None
    fields: dict[str, Any] = resolve_target(target).to_dict()
    return fields


def expand_models(models: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The model files of ``models``: files as given (missing ones too: they fail as models),
    folders searched recursively for known model files, in sorted order."""
    paths: list[Path] = []
    for m in models:
        p = Path(m)
        if p.is_dir():
            endings = model_endings()  # what a folder given as MODELS is searched for
            paths.extend(sorted(f for f in p.rglob("*") if f.is_file() and f.name.lower().endswith(endings)))
        else:
            paths.append(p)
    if not paths:
        raise BatchError("no models to process", hint="give model files, or folders that hold some")
    return paths


def safe_names(paths: Sequence[Path]) -> list[str]:
    """A distinct folder name per model, from its file name ('deploy.prototxt' -> 'deploy'),
    prefixed by its folder or numbered when two models share a name."""
    stems = [_stem(p) for p in paths]
    # the batch's own files sit beside the model folders: a model folder never takes their name
    names: list[str] = list(RESERVED)
    for p, stem in zip(paths, stems, strict=True):
        name = stem
        if stems.count(stem) > 1 and p.parent.name:
            name = f"{safe_file(p.parent.name)}-{stem}"
        base, n = name, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names[len(RESERVED):]


def _stem(p: Path) -> str:
    name = p.name
    for suffix in model_endings():
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return safe_file(name) or "model"


def _common_options(mode: str, plugins: Sequence[str | os.PathLike[str]],
                    input_shapes: Mapping[str, Sequence[int]] | None, target: str, seed: int,
                    tolerance: str | tuple[float, float] | None) -> Task:
    """The part of every task that is the same for all models (plugins read once, as bytes)."""
    from ..plugins_loader import plugin_paths_from_env

    files = [Path(p) for p in plugins] + list(plugin_paths_from_env())
    plugin_data = []
    for p in files:
        try:
            plugin_data.append((p.name, p.read_bytes()))
        except OSError as err:
            raise BatchError(f"plugin '{p}' cannot be read: {err.strerror or err}",
                             hint="check the --plugin path") from None
    shapes = {k: [int(d) for d in v] for k, v in (input_shapes or {}).items()}
    tol = ",".join(map(str, tolerance)) if isinstance(tolerance, tuple) else tolerance
    return {"mode": mode, "plugins": plugin_data, "input_shapes": shapes, "target": target,
            "seed": seed, "tolerance": tol}


def _build_tasks(paths: Sequence[Path], weights: str | os.PathLike[str] | None,
                 common: Task) -> tuple[list[Task | None], dict[int, TaskResult]]:
    """One task per model; a model whose files cannot be read gets its error result at once."""
    tasks: list[Task | None] = []
    early: dict[int, TaskResult] = {}
    for i, p in enumerate(paths):
        try:
            if p.exists() and not p.is_file():  # a FIFO or a device would block or never end
                raise IsADirectoryError(0, "not a regular file (a folder, a pipe or a device)", str(p))
            tasks.append({**common, "name": str(p), "model_name": p.name, "model": p.read_bytes(),
                          "companions": _companions(p), **_weights_for(p, weights, common["seed"])})
        except OSError as err:
            tasks.append(None)
            early[i] = {"name": str(p), "status": "error", "error_kind": "user", "figures": {},
                        "outputs": {}, "error": f"cannot read '{err.filename or p}': {err.strerror or err}"}
    return tasks, early


def _weights_for(p: Path, weights: str | os.PathLike[str] | None, seed: int) -> Task:
    """How a model gets its weights: the one file given, a Caffe net's sibling NAME.caffemodel,
    else random Caffe weights made in the task."""
    if weights is not None:
        return {"weights": (Path(weights).name, Path(weights).read_bytes()), "weights_source": "given"}
    if not p.name.lower().endswith(".prototxt"):
        return {}
    sibling = p.with_suffix(".caffemodel")
    if sibling.is_file():
        return {"weights": (sibling.name, sibling.read_bytes()), "weights_source": "sibling"}
    return {"random_weights": True, "weights_source": f"random (seed {seed})"}


def _companions(p: Path) -> list[tuple[str, bytes]]:
    """Files a model reads beside itself: a TorchScript-json's NAME.ts.safetensors."""
    if p.name.lower().endswith(".ts.json"):
        side = p.with_name(p.name[: -len(".json")] + ".safetensors")
        if side.is_file():
            return [(p.name[: -len(".json")] + ".safetensors", side.read_bytes())]
    return []


def _jobs(jobs: int | None, n: int) -> int:
    if jobs is not None and jobs < 1:
        raise BatchError(f"--jobs {jobs}: must be at least 1",
                         hint="give --jobs 1 or more, or leave it out to use one job per core")
    return max(1, jobs if jobs is not None else min(os.cpu_count() or 1, n))


def _run_local(todo: Sequence[tuple[int, Task]], jobs: int, on_done: Callable[[int, TaskResult], None]) -> None:
    """Run the tasks in ``jobs`` spawned worker processes (spawn: no state inherited by fork).

    A worker that dies (killed, out of memory, a plugin calling exit) breaks the whole pool, and
    every unfinished task with it; those tasks run again one per fresh single-worker pool, so only
    the model that kills its worker fails."""
    broken = _pool_pass(todo, jobs, on_done, retry_lost=True)
    for item in broken:
        _pool_pass([item], 1, on_done, retry_lost=False)


def _pool_pass(todo: Sequence[tuple[int, Task]], jobs: int, on_done: Callable[[int, TaskResult], None],
               *, retry_lost: bool) -> list[tuple[int, Task]]:
    """One pool over ``todo``; returns the tasks lost to a broken pool when ``retry_lost``."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    lost: list[tuple[int, Task]] = []
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_task, task): (i, task) for i, task in todo}
        for fut in as_completed(futures):
            i, task = futures[fut]
            try:
                res = fut.result()
            except BrokenProcessPool as err:
                if retry_lost:
                    lost.append((i, task))
                    continue
                res = _lost(task, err)
            except Exception as err:  # a result that cannot come back (not picklable, ...)
                res = _lost(task, err)
            on_done(i, res)
    return sorted(lost, key=lambda item: item[0])


def _run_ray(todo: Sequence[tuple[int, Task]], address: str | None, on_done: Callable[[int, TaskResult], None]) -> None:
    """Run the tasks as Ray remote tasks; ``address`` None starts a local Ray for this batch."""
    try:
        import ray
    except ImportError:
        raise BatchError("--ray needs Ray, which is not installed",
                         hint="pip install 'opbridge[ray]', or run without --ray") from None
    started = not ray.is_initialized()
    if started:
        # a local Ray for this run needs no dashboard; a cluster's own settings are left alone
        local: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False} if address is None else {}
        _check_reachable(address)
        try:
            ray.init(address=address, **local)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise BatchError(f"cannot reach the Ray cluster at '{address}': {err}",
                             hint="give the head's address (auto on a cluster node, ray://HEAD:10001 "
                             "from outside), or --ray alone for a local Ray") from None
    try:
        remote = ray.remote(num_cpus=1)(run_task)
        refs = {remote.remote(task): (i, task) for i, task in todo}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                i, task = refs[ref]
                try:
                    res = ray.get(ref)
                except Exception as err:  # the worker or its node died
                    res = _lost(task, err)
                on_done(i, res)
    finally:
        if started:
            ray.shutdown()


def _check_reachable(address: str | None) -> None:
    """A HOST:PORT that does not answer is a user error; Ray's own client aborts the process on
    one (after a long wait) instead of raising."""
    import socket

    host, sep, port = (address or "").rpartition(":")
    if not sep or "://" in (address or "") or not port.isdigit():
        return  # auto, ray://..., or none: Ray resolves those itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as err:
        raise BatchError(f"cannot reach the Ray cluster at '{address}': {err.strerror or err}",
                         hint="check the head's address and port (ray start --head prints it)") from None


def _lost(task: Task, err: BaseException) -> TaskResult:
    return {"name": task["name"], "status": "error", "error_kind": "internal", "figures": {},
            "outputs": {}, "weights": task.get("weights_source", ""),
            "error": f"the worker running this model died: {type(err).__name__}: {err}"}


def _store(out: Path, name: str, path: str, res: TaskResult) -> ModelResult:
    """Write a task's output files under ``out/name/`` and keep the rest as a ModelResult."""
    from ..ir.io import atomic_write

    written = []
    for fname, data in res.get("outputs", {}).items():
        dest = out / name / safe_file(fname)
        dest.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(dest, lambda tmp, data=data: Path(tmp).write_bytes(data))
        written.append(f"{name}/{dest.name}")
    return ModelResult(name=name, path=path, dir=name, status=res["status"], error=res.get("error"),
                       error_kind=res.get("error_kind"), verdict=res.get("verdict", ""),
                       first_divergence=res.get("first_divergence"), weights=res.get("weights", ""),
                       figures=dict(res.get("figures", {})), outputs=written)


class _Progress:
    """A rich progress bar over the models (only where stderr is a terminal)."""

    def __init__(self, enabled: bool, total: int, title: str) -> None:
        from ..validate.progress import Stages

        self.stages = Stages(enabled, total, title)
        self.count, self.total = 0, total

    def done(self, name: str, status: str) -> None:
        self.count += 1
        with self.stages.stage(f"{self.count}/{self.total} {name}: {status}"):
            pass

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stages.close()
