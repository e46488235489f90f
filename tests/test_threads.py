"""BLAS threads per call: ``threads=N``, ``OPBRIDGE_NUM_THREADS``, ``--threads N``.

Each test reads threadpoolctl's view of the BLAS numpy loaded *inside* the run (from an op's
compute or from the executor), so what is checked is the limit in force, not a timing.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import opbridge as ob
import opbridge.simulator.run as run_mod
from opbridge.cli import main
from opbridge.errors import OpbridgeError
from opbridge.ir.opdef import OpRegistry
from opbridge.threads import DEFAULT_THREADS, ENV_VAR, _threadpool_controller, resolve_threads

# the module, not the function opbridge.ir re-exports under the same name
interp_mod = importlib.import_module("opbridge.ir.interpret")


def _blas_threads() -> int:
    """Threads of the BLAS libraries numpy had loaded when opbridge first limited BLAS (others,
    such as torch's own, load later in a test session and are not what the kernels call)."""
    ours = {lib.filepath for lib in _threadpool_controller().lib_controllers
            if lib.user_api == "blas"}
    counts = {int(i["num_threads"]) for i in threadpool_info()
              if i["user_api"] == "blas" and i["filepath"] in ours}
    if not counts:
        pytest.skip("numpy runs on no BLAS that threadpoolctl can see")
    assert len(counts) == 1, f"numpy's BLAS libraries disagree: {counts}"
    return counts.pop()


#: BLAS threads outside any run; a limit above it cannot be observed
OUTSIDE = _blas_threads() if any(i["user_api"] == "blas" for i in threadpool_info()) else 1
needs_two = pytest.mark.skipif(OUTSIDE < 2, reason="BLAS runs one thread here; a limit of 2 "
                               "would not be visible")


def _probe_graph(seen: list[int]) -> ob.Graph:
    reg = OpRegistry()

    def probe(x: np.ndarray) -> np.ndarray:
        seen.append(_blas_threads())
        return x

    (reg.define("ThreadProbe").input("x", "T").output("y", "T").type_param("T", ("f32",))
        .shape_fn(lambda ctx: ctx.same_as_input(0)).compute(probe))
    b = ob.GraphBuilder("probe", registry=reg)
    b.output(b.op("ThreadProbe", [b.input("x", "f32", (2, 3))]))
    return b.build()


FEEDS = {"x": np.ones((2, 3), np.float32)}


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


@pytest.mark.parametrize("threads", [None, 1, pytest.param(2, marks=needs_two)],
                         ids=["threads=absent", "threads=1", "threads=2"])
def test_interpret_sets_blas_threads(threads):
    seen: list[int] = []
    ob.interpret(_probe_graph(seen), FEEDS, threads=threads)
    assert seen == [DEFAULT_THREADS if threads is None else threads]
    assert _blas_threads() == OUTSIDE  # restored after the call


@needs_two
def test_interpret_threads_zero_leaves_blas_alone():
    seen: list[int] = []
    ob.interpret(_probe_graph(seen), FEEDS, threads=0)
    assert seen == [OUTSIDE]


@needs_two
def test_env_var_sets_the_default_and_argument_wins(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "2")
    seen: list[int] = []
    g = _probe_graph(seen)
    ob.interpret(g, FEEDS)
    ob.interpret(g, FEEDS, threads=1)
    assert seen == [2, 1]


@pytest.mark.parametrize("threads", [None, 1, pytest.param(2, marks=needs_two)],
                         ids=["threads=absent", "threads=1", "threads=2"])
def test_program_run_sets_blas_threads(threads):
    seen: list[int] = []
    prog = ob.compile(_probe_graph(seen), target="bm1684")
    prog.run(FEEDS, threads=threads)
    assert seen == [DEFAULT_THREADS if threads is None else threads]
    assert _blas_threads() == OUTSIDE


def test_limit_restored_when_the_run_fails():
    with pytest.raises(OpbridgeError):
        ob.interpret(_probe_graph([]), {"x": np.ones((3, 3), np.float32)}, threads=1)
    assert _blas_threads() == OUTSIDE


@pytest.mark.parametrize("bad", [-1, "two", 1.5, True], ids=["-1", "two", "1.5", "True"])
def test_bad_thread_counts_are_errors(bad, monkeypatch):
    with pytest.raises(OpbridgeError, match="threads"):
        resolve_threads(bad)
    monkeypatch.setenv(ENV_VAR, str(bad))
    with pytest.raises(OpbridgeError, match=ENV_VAR):
        resolve_threads(None)


def _record(monkeypatch, module, name: str) -> list[int]:
    seen: list[int] = []
    orig = getattr(module, name)

    def recording(*a, **k):
        seen.append(_blas_threads())
        return orig(*a, **k)

    monkeypatch.setattr(module, name, recording)
    return seen


@pytest.fixture()
def tiny_program(tmp_path):
    b = ob.GraphBuilder("tiny")
    x = b.input("x", "f32", (1, 4))
    w = b.constant("w", np.ones((4, 4), np.float32))
    b.output(b.op("MatMul", [x, w]))
    g = b.build()
    path = tmp_path / "tiny.obprog"
    ob.compile(g, target="bm1684").save(path)
    obir = tmp_path / "tiny.obir"
    ob.save(g, obir)
    return path, obir


@pytest.mark.parametrize("argv,want", [([], DEFAULT_THREADS), (["--threads", "1"], 1),
                                       pytest.param(["--threads", "2"], 2, marks=needs_two)],
                         ids=["absent", "1", "2"])
def test_cli_run_threads(argv, want, tiny_program, monkeypatch):
    seen = _record(monkeypatch, run_mod.Executor, "run")
    assert main(["run", str(tiny_program[0]), "--random-input", *argv]) == 0
    assert seen == [want]


@needs_two
def test_cli_validate_threads_reach_interpreter_and_simulator(tiny_program, monkeypatch):
    seen_i = _record(monkeypatch, interp_mod, "_interpret")
    seen_s = _record(monkeypatch, run_mod.Executor, "run")
    rc = main(["validate", str(tiny_program[1]), "--threads", "2", "--no-origin"])
    assert rc == 0
    assert seen_i and set(seen_i) == {2}
    assert seen_s and set(seen_s) == {2}


def test_cli_bad_threads_is_a_usage_error(tiny_program, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", str(tiny_program[0]), "--random-input", "--threads", "-3"])
    assert exc.value.code == 2
    assert "--threads" in capsys.readouterr().err


def test_cli_threads_win_over_env_var(tiny_program, monkeypatch):
    monkeypatch.setenv(ENV_VAR, "2")
    seen = _record(monkeypatch, run_mod.Executor, "run")
    assert main(["run", str(tiny_program[0]), "--random-input", "--threads", "1"]) == 0
    assert seen == [1]
