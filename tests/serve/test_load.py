"""Load: 50 concurrent submissions to a real server all complete, none lost, and /api/health keeps
answering meanwhile (each health request within the client's 5 s timeout; the figure is printed,
not asserted: tests never assert timings, and this machine is shared)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from .helpers import FINAL, Server

N_JOBS = 50


def test_fifty_concurrent_submissions_all_complete(small_onnx, tmp_path):
    server = Server(tmp_path / "data", "--workers", "2")
    model = small_onnx.read_bytes()
    health_times: list[float] = []
    health_errors: list[str] = []
    submitting = threading.Event()
    finished = threading.Event()

    def poll_health() -> None:
        with httpx.Client(base_url=server.url, timeout=5.0) as c:
            submitting.wait(10)
            for _ in range(2000):  # bounded; ends when the jobs do
                if finished.is_set():
                    return
                t0 = time.perf_counter()
                r = c.get("/api/health")
                health_times.append(time.perf_counter() - t0)
                if r.status_code != 200 or r.json()["status"] != "ok":
                    health_errors.append(r.text)
                time.sleep(0.05)

    def submit(i: int) -> str:
        submitting.set()
        r = server.client.post("/api/jobs", files={"model": (f"m{i}.onnx", model)})
        assert r.status_code == 202, r.text
        return r.json()["id"]

    watcher = threading.Thread(target=poll_health)
    watcher.start()
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=16) as pool:
            ids = list(pool.map(submit, range(N_JOBS)))
        assert len(set(ids)) == N_JOBS
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            jobs = {j["id"]: j for j in server.client.get("/api/jobs").json()["jobs"]}
            if all(jobs.get(i, {}).get("status") in FINAL for i in ids):
                break
            time.sleep(0.5)
        print(f"{N_JOBS} jobs submitted and finished in {time.monotonic() - t0:.1f} s")
    finally:
        finished.set()
        watcher.join()
        server.stop()
    assert set(ids) <= set(jobs), "a submitted job is missing from the list"
    statuses = [jobs[i]["status"] for i in ids]
    assert statuses == ["done"] * N_JOBS, [(jobs[i]["error"], jobs[i]["hint"]) for i in ids if jobs[i]["status"] != "done"][:3]
    assert sorted(jobs[i]["model"] for i in ids) == sorted(f"m{i}.onnx" for i in range(N_JOBS))
    assert not health_errors
    print(f"/api/health: {len(health_times)} requests meanwhile, slowest {max(health_times) * 1000:.0f} ms")
    assert len(health_times) >= 5, "the health loop barely ran"
