"""Shared by the serve tests: a small model, waiting for jobs, a real server on a free port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

FINAL = ("done", "failed")


def wait_job(client: Any, job_id: str, timeout: float = 90.0, statuses: tuple[str, ...] = FINAL) -> dict:
    """Poll GET /api/jobs/ID until its status is one of ``statuses`` (bounded by ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/api/jobs/{job_id}").json()
        if job["status"] in statuses or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``opbridge serve`` in its own process group, so a test can kill it (and only it) hard."""

    def __init__(self, data: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(data.parent / f"serve-{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "opbridge", "serve", "--port", str(self.port), "--data", str(data), *args],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.client = httpx.Client(base_url=self.url, timeout=30.0)
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.client.get("/api/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"opbridge serve did not start: {self.output()}")
            time.sleep(0.2)

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-3000:]

    def kill(self) -> None:
        """SIGKILL the server process only (its job workers must notice on their own)."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.client.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.client.close()
        self.log.close()
