"""``ob.validate(threads=N)``: the Python name of ``opbridge validate --threads N``.

As in tests/test_threads.py, what is checked is threadpoolctl's view of numpy's BLAS *inside*
the interpreter's and the simulator's runs, i.e. the limit in force, not a timing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
import opbridge.simulator.run as run_mod
from opbridge.cli import main
from opbridge.threads import DEFAULT_THREADS, ENV_VAR, resolve_threads
from tests.test_threads import _record, interp_mod, needs_two


@pytest.fixture()
def obir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(ENV_VAR, raising=False)
    b = ob.GraphBuilder("tiny")
    x = b.input("x", "f32", (1, 4))
    w = b.constant("w", np.arange(16, dtype=np.float32).reshape(4, 4))
    b.output(b.op("MatMul", [x, w]))
    path = tmp_path / "tiny.obir"
    ob.save(b.build(), path)
    return path


@pytest.mark.parametrize("n", [1, pytest.param(2, marks=needs_two)])
def test_threads_limits_blas_as_the_cli_option_does(n: int, obir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the other count in the environment: the keyword wins over it, as --threads does
    monkeypatch.setenv(ENV_VAR, str(3 - n))
    seen_interp = _record(monkeypatch, interp_mod, "_interpret")
    seen_sim = _record(monkeypatch, run_mod.Executor, "run")
    assert main(["validate", str(obir), "--threads", str(n), "--no-origin"]) == 0
    cli = (list(seen_interp), list(seen_sim))
    seen_interp.clear()
    seen_sim.clear()
    report = ob.validate(obir, threads=n, origin=False)
    assert report.passed and report.rows
    assert (seen_interp, seen_sim) == cli
    assert seen_interp and set(seen_interp) == {n}
    assert seen_sim and set(seen_sim) == {n}
    # the setting ends with the call
    monkeypatch.delenv(ENV_VAR)
    assert resolve_threads() == DEFAULT_THREADS


@pytest.mark.parametrize("bad", [-1, "two", 1.5, True])
def test_a_bad_thread_count_is_an_error_naming_the_keyword(bad: object, obir: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _record(monkeypatch, interp_mod, "_interpret")
    with pytest.raises(ob.OpbridgeError, match=rf"^threads = {bad!r}: the number of threads") as err:
        ob.validate(obir, threads=bad, origin=False)  # type: ignore[arg-type]
    assert "0 to leave BLAS its own setting" in (err.value.hint or "")
    assert seen == []  # refused before anything ran
