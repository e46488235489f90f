"""A job that crashes, hangs or asks for too much memory ends in its own worker; the server and
the next job carry on. Plugins (allowed here) stand in for a misbehaving model."""

from __future__ import annotations

import pytest

from .helpers import wait_job
from .test_api import submit

PLUGINS = {
    "crash": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "hang": "import time\ntime.sleep(120)\n",
    # np.empty only reserves address space: without the limit this would succeed
    "memory": "import numpy as np\nhog = np.empty(3 * 2**30, dtype=np.uint8)\n",
    "exit": "import os, sys\nprint('giving up now', file=sys.stderr, flush=True)\nos._exit(5)\n",
}


#: the time limit of the hang case (s)
HANG_LIMIT_S = 10


@pytest.mark.parametrize("kind, message", [
    ("crash", "killed by signal SIGKILL"),
    ("hang", f"exceeded its time limit of {HANG_LIMIT_S} s"),
    ("memory", "MemoryError: Unable to allocate 3.00 GiB"),
    ("exit", "exited with code 5 before writing a result"),
])
def test_misbehaving_job_fails_alone(make_client, small_onnx, tmp_path, kind, message):
    plugin = tmp_path / "bad_plugin.py"
    plugin.write_text(PLUGINS[kind])
    # the time limit holds for the good job too: short only where the hang is the point, and
    # even there several times what a small job takes on a loaded machine (~2 s)
    client = make_client(allow_plugins=True, workers=2, job_timeout_s=HANG_LIMIT_S if kind == "hang" else 300,
                         job_memory_mb=2048)
    bad = submit(client, small_onnx, plugins=[plugin]).json()["id"]
    good = submit(client, small_onnx).json()["id"]
    job = wait_job(client, bad)
    assert job["status"] == "failed" and message in job["error"], job
    if kind == "exit":
        assert job["hint"] == "the worker's last words: giving up now"
    assert wait_job(client, good)["status"] == "done"
    assert client.get("/api/health").json()["status"] == "ok"


def test_allowed_plugin_is_loaded_by_the_job(make_client, small_onnx, tmp_path):
    plugin = tmp_path / "marker.py"
    marker = tmp_path / "ran"
    plugin.write_text(f"open({str(marker)!r}, 'w').write('yes')\n")
    client = make_client(allow_plugins=True)
    assert wait_job(client, submit(client, small_onnx, plugins=[plugin]).json()["id"])["status"] == "done"
    assert marker.read_text() == "yes"


def test_delete_of_a_running_job_stops_it(make_client, small_onnx, tmp_path):
    plugin = tmp_path / "slow.py"
    plugin.write_text(PLUGINS["hang"])
    client = make_client(allow_plugins=True, workers=1)
    slow = submit(client, small_onnx, plugins=[plugin]).json()["id"]
    assert wait_job(client, slow, statuses=("running",))["status"] == "running"
    assert client.delete(f"/api/jobs/{slow}").status_code == 200
    # the one worker slot is free again: the next job runs although the deleted one would hang 120 s
    assert wait_job(client, submit(client, small_onnx).json()["id"], timeout=60)["status"] == "done"
    assert client.get(f"/api/jobs/{slow}").status_code == 404
    # the slot removed the deleted job's files before it took the next job
    assert not (tmp_path / "data" / "jobs" / slow).exists()


def test_delete_of_a_job_that_finished_meanwhile_removes_its_files(make_client, small_onnx, tmp_path,
                                                                    monkeypatch):
    """DELETE reads the job, then deletes it: a job read as running that has finished since is no
    slot's any more, so the server removes its directory (none is left behind)."""
    client = make_client()
    job_id = submit(client, small_onnx).json()["id"]
    assert wait_job(client, job_id)["status"] == "done"
    store = client.app.state.service.store
    read = store.get
    monkeypatch.setattr(store, "get", lambda i: read(i) and {**read(i), "status": "running"})
    assert client.delete(f"/api/jobs/{job_id}").status_code == 200
    assert not (tmp_path / "data" / "jobs" / job_id).exists()


def test_memory_plugin_runs_without_the_limit(make_client, small_onnx, tmp_path):
    """The counterpart of the 'memory' case: the same allocation passes when no limit is set."""
    plugin = tmp_path / "reserve.py"
    plugin.write_text(PLUGINS["memory"])
    client = make_client(allow_plugins=True, job_memory_mb=0)
    job = wait_job(client, submit(client, small_onnx, plugins=[plugin]).json()["id"])
    assert job["status"] == "done", job
