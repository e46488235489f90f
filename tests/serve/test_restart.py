"""A real ``opbridge serve`` killed mid-job and restarted on the same --data loses nothing."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import time

from .helpers import Server, wait_job


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _worker_pid(jobdir) -> int:
    """The pid the job's worker records as it starts (bounded wait: 'running' comes first, and the
    first job of a server also waits for its forkserver to import opbridge)."""
    deadline = time.monotonic() + 90
    while not (jobdir / "worker.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (jobdir / "worker.pid").exists(), f"no worker.pid in {jobdir} after 90 s"
    return int((jobdir / "worker.pid").read_text())


def test_restart_fails_the_running_job_and_runs_the_queued_one(small_onnx, tmp_path):
    slow_plugin = tmp_path / "slow.py"
    slow_plugin.write_text("import time\ntime.sleep(120)\n")
    data = tmp_path / "data"
    server = Server(data, "--workers", "1", "--allow-plugins")
    try:
        files = {"model": ("m.onnx", small_onnx.read_bytes())}
        slow = server.client.post("/api/jobs", files=[*files.items(), ("plugin", ("s.py", slow_plugin.read_bytes()))])
        queued = server.client.post("/api/jobs", files=files)
        slow_id, queued_id = slow.json()["id"], queued.json()["id"]
        assert wait_job(server.client, slow_id, statuses=("running",))["status"] == "running"
        assert server.client.get(f"/api/jobs/{queued_id}").json()["status"] == "queued"
        pid = _worker_pid(data / "jobs" / slow_id)
        server.kill()
    finally:
        server.stop()

    server = Server(data, "--workers", "1", "--allow-plugins")
    try:
        slow_job = server.client.get(f"/api/jobs/{slow_id}").json()
        assert slow_job["status"] == "failed"
        assert "the server stopped while this job was running" in slow_job["error"]
        assert wait_job(server.client, queued_id)["status"] == "done"
        assert {j["id"] for j in server.client.get("/api/jobs").json()["jobs"]} == {slow_id, queued_id}
        # the orphaned worker of the killed server ended itself instead of sleeping on
        job_dir = data / "jobs" / slow_id
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.2)
        assert not _alive(pid)
        assert not (job_dir / "result.json").exists()
    finally:
        server.stop()


def test_graceful_stop_kills_the_running_job_and_says_so(small_onnx, tmp_path):
    slow_plugin = tmp_path / "slow.py"
    slow_plugin.write_text("import time\ntime.sleep(120)\n")
    data = tmp_path / "data"
    server = Server(data, "--workers", "1", "--allow-plugins")
    try:
        r = server.client.post("/api/jobs", files=[("model", ("m.onnx", small_onnx.read_bytes())),
                                                   ("plugin", ("s.py", slow_plugin.read_bytes()))])
        slow_id = r.json()["id"]
        assert wait_job(server.client, slow_id, statuses=("running",))["status"] == "running"
        pid = _worker_pid(data / "jobs" / slow_id)
    finally:
        server.stop()  # SIGTERM: uvicorn's shutdown stops the scheduler
    # uvicorn re-raises the signal after its shutdown has run: -SIGTERM is a clean stop
    assert server.proc.returncode in (0, -signal.SIGTERM), server.output()
    assert not _alive(pid)
    # recorded by the stopping server itself (a restart would fail it anyway, so read the database)
    with contextlib.closing(sqlite3.connect(data / "jobs.sqlite3")) as db:
        status, error = db.execute("SELECT status, error FROM jobs WHERE id = ?", (slow_id,)).fetchone()
    assert status == "failed" and "the server stopped while this job was running" in error
