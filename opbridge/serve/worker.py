"""One job, in its own process: convert -> .obir -> compile -> .obprog -> validate -> reports.

The job directory holds ``spec.json`` (written by the server) and the uploaded files; the worker
writes the artefacts and ``result.json`` there. Run by the scheduler in a fresh process per job, or
by hand for debugging: ``python -m opbridge.serve.worker JOBDIR``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

RESULT = "result.json"
LOG = "worker.log"


def limit_memory(memory_mb: int | None) -> None:
    """Cap this process's address space, so that a model that asks for too much fails here with a
    MemoryError instead of pushing the machine into swap."""
    if not memory_mb:
        return
    import resource

    limit = int(memory_mb) * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a killed server its parent has not reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: existence is all we can tell
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def exit_with_server(server_pid: int | None) -> None:
    """End this process when the server that queued the job goes away (killed): an orphaned job
    would otherwise run on, and its result land after the restarted server failed it. The server
    is watched by pid, not as the parent: a forkserver child's parent is the forkserver, which
    itself lives on while any of its children do."""
    if server_pid is None:
        return

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if not _running(server_pid):
                os._exit(70)

    threading.Thread(target=watch, daemon=True, name="server-watch").start()


def run_job(jobdir: str, memory_mb: int | None = None, server_pid: int | None = None) -> None:
    """Run the job in ``jobdir`` and write ``result.json``; never raises for a job's own failure."""
    exit_with_server(server_pid)
    limit_memory(memory_mb)
    d = Path(jobdir)
    # for an operator (and the tests) to find it; whole or absent, never an empty file to a reader
    _write_whole(d / "worker.pid", str(os.getpid()))
    # what the job prints, and a traceback if the worker dies, go to its own log, not the server's
    log = os.open(d / LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    spec = json.loads((d / "spec.json").read_text())
    timings: dict[str, float] = {}
    try:
        result = _pipeline(d, spec, timings)
    except MemoryError:
        result = {"status": "failed", "error": f"the job ran out of memory (limit {memory_mb} MiB)",
                  "hint": "a smaller model or input shape, or a server started with a larger memory limit"}
    except Exception as err:  # a job's failure is its result, reported to the user
        result = _failure(err)
    # messages name the model by its path in the server's data directory: show the stored name
    for key in ("error", "hint", "summary"):
        if isinstance(result.get(key), str):
            result[key] = result[key].replace(str(d) + os.sep, "")
    result["timings"] = timings
    _write_whole(d / RESULT, json.dumps(result))


def _write_whole(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file and rename it onto ``path``: the server and an operator
    polling for the file see it complete or not at all."""
    from ..ir.io import atomic_write

    atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def _failure(err: Exception) -> dict[str, Any]:
    from ..errors import OpbridgeError

    if isinstance(err, OpbridgeError):
        return {"status": "failed", "error": err.message, "hint": err.hint, "error_type": type(err).__name__}
    return {"status": "failed", "error": f"internal error: {type(err).__name__}: {err}",
            "hint": "this is a bug in opbridge or a plugin; please report it with the model",
            "error_type": type(err).__name__}


def _pipeline(d: Path, spec: dict[str, Any], timings: dict[str, float]) -> dict[str, Any]:
    import opbridge as ob

    model = str(d / spec["model"])
    weights = str(d / spec["weights"]) if spec.get("weights") else None
    if weights and model.endswith(".ts.json"):
        _name_weights_in_json(Path(model), spec["weights"])
        weights = None
    plugins = [str(d / p) for p in spec.get("plugins", [])]
    shapes = {k: tuple(v) for k, v in (spec.get("input_shapes") or {}).items()} or None
    target = spec.get("target") or "bm1684"

    def step(name: str, fn: Any) -> Any:
        t0 = time.perf_counter()
        out = fn()
        timings[name] = round(time.perf_counter() - t0, 4)
        return out

    graph = step("convert", lambda: ob.convert(model, weights=weights, input_shapes=shapes, plugins=plugins))
    step("save_obir", lambda: ob.save(graph, str(d / "model.obir")))
    program = step("compile", lambda: ob.compile(graph, target))
    step("save_obprog", lambda: program.save(str(d / "model.obprog")))
    report = step("validate", lambda: _validate(graph, program, model, weights))
    step("reports", lambda: (report.write_json(str(d / "report.json")), report.write_html(str(d / "report.html"))))
    return {"status": "done", "verdict": "pass" if report.passed else "fail", "summary": report.summary()}


def _validate(graph: Any, program: Any, model: str, weights: str | None) -> Any:
    """Validate the graph and program this job already converted and compiled (against the
    origin framework on the uploaded model) instead of converting and compiling them again."""
    from ..validate.api import validate_graph
    from ..validate.inputs import make_inputs
    from ..validate.runners import detect_framework

    feeds, where = make_inputs(graph)
    return validate_graph(graph, feeds, framework=detect_framework(model), source=model, weights=weights,
                          label=model, program=program, inputs_desc=where)


def _name_weights_in_json(model: Path, weights_name: str) -> None:
    """A TorchScript-json names its weights file, a bare name beside it; the upload was stored
    under a fixed name, so point the stored JSON at it (its weights then come from the JSON)."""

    from ..ir.io import read_json

    doc = read_json(model.read_bytes(), "[torchscript] the uploaded .ts.json",
                    hint="upload the .ts.json that opbridge export-torchscript wrote")
    doc["weights"] = weights_name
    model.write_text(json.dumps(doc), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2):
        sys.stderr.write("usage: python -m opbridge.serve.worker JOBDIR [MEMORY_MB]\n")
        return 2
    run_job(args[0], int(args[1]) if len(args) == 2 else None)
    print((Path(args[0]) / RESULT).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
