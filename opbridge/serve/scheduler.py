"""Runs queued jobs, each in a fresh worker process, at most ``workers`` at a time.

Processes come from a ``forkserver`` that has imported opbridge once: every job still gets a
process of its own (plugins it loads, memory it leaks and crashes stay there; a timeout kills
it), without paying the 1-2 s import of numpy/onnx/opbridge per job that ``spawn`` would.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import threading
from multiprocessing.connection import wait as mp_wait
from pathlib import Path
from typing import Any

from .config import ServeConfig
from .store import JobStore
from .worker import LOG, RESULT, run_job

INTERRUPTED = "the server stopped while this job was running; submit it again"

_ctx: Any = None
_ctx_lock = threading.Lock()
# Process.start() polls every other child (multiprocessing's _cleanup), and a poll reads the exit
# status the forkserver sends: two threads polling one process race for it, and the loser reads
# EOF, which multiprocessing reports as exit code 255. So starts and status reads take turns.
_PROC_LOCK = threading.Lock()


def _context() -> Any:
    global _ctx
    with _ctx_lock:
        if _ctx is None:
            _ctx = multiprocessing.get_context("forkserver")
            _ctx.set_forkserver_preload(["opbridge", "opbridge.validate", "opbridge.simulator", "onnx"])
        return _ctx


class Scheduler:
    def __init__(self, config: ServeConfig, store: JobStore) -> None:
        self.config = config
        self.store = store
        self._wake = threading.Condition()
        self._stopping = False
        self._procs: dict[str, Any] = {}  # job id -> its Process (None while it starts)
        self._cancelled: set[str] = set()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Fail what a previous server left running, then start the worker slots (queued jobs run)."""
        self.store.fail_interrupted(INTERRUPTED)
        for i in range(max(1, self.config.workers)):
            t = threading.Thread(target=self._slot, daemon=True, name=f"opbridge-serve-slot-{i}")
            t.start()
            self._threads.append(t)

    def notify(self) -> None:
        with self._wake:
            self._wake.notify()

    def stop(self) -> None:
        """Stop taking jobs; kill the running ones (they are failed as interrupted, as after a crash)."""
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
            procs = [p for p in self._procs.values() if p is not None]
        for p in procs:
            p.kill()
        for t in self._threads:
            t.join(timeout=10)

    def cancel(self, job_id: str) -> bool:
        """Kill the job's process if the job is starting or running (DELETE of a job). True: the
        scheduler has the job and removes its directory once its process has ended; False: no
        slot has it (queued, finished or unknown), so the caller removes the directory."""
        with self._wake:
            if job_id not in self._procs:
                return False
            self._cancelled.add(job_id)
            proc = self._procs[job_id]
        if proc is not None:
            proc.kill()
        return True

    def _slot(self) -> None:
        while True:
            with self._wake:
                if self._stopping:
                    return
                job = self.store.claim_next()
                if job is None:
                    self._wake.wait(timeout=1.0)
                    continue
                # the slot has it from the moment it is marked running: a DELETE from now on
                # leaves its directory to the slot (which may be about to start its worker)
                self._procs[job["id"]] = None
            self._run(job)

    def _run(self, job: dict[str, Any]) -> None:
        job_id = job["id"]
        jobdir = self.config.jobs_dir / job_id
        proc = _context().Process(target=run_job, args=(str(jobdir), self.config.job_memory_mb, os.getpid()),
                                  name=f"opbridge-job-{job_id}", daemon=False)
        with self._wake:
            if self._stopping:
                self._procs.pop(job_id, None)
                self.store.finish(job_id, "failed", error=INTERRUPTED)
                return
            # starting (None since the claim): stop() and cancel() check again once it runs
        # started outside the lock: a fork of a big process can take a while, and the app's
        # notify() must never wait for it
        with _PROC_LOCK:
            proc.start()
        with self._wake:
            self._procs[job_id] = proc
            kill_now = self._stopping or job_id in self._cancelled
        if kill_now:
            proc.kill()
        # wait on the sentinel, which reads nothing; the exit status is read under the lock
        timed_out = not mp_wait([proc.sentinel], self.config.job_timeout_s)
        if timed_out:
            proc.kill()
            mp_wait([proc.sentinel], 60)
        with _PROC_LOCK:
            exitcode = proc.exitcode
        with self._wake:
            cancelled = job_id in self._cancelled
            stopping = self._stopping
        try:
            if not cancelled:
                self._record(job_id, jobdir, exitcode, timed_out, stopping)
        finally:
            # released only after the record is read: a DELETE that comes in meanwhile (the job
            # just finished) is still the slot's to clean up, so nobody removes the directory
            # under _record, and no directory is left behind (nor when _record fails)
            with self._wake:
                self._procs.pop(job_id, None)
                cancelled = job_id in self._cancelled
                self._cancelled.discard(job_id)
            if cancelled:
                shutil.rmtree(jobdir, ignore_errors=True)

    def _record(self, job_id: str, jobdir: Path, exitcode: int | None, timed_out: bool, stopping: bool) -> None:
        result_file = jobdir / RESULT
        # the worker writes its result atomically as its last act: a result on disk is the job's
        # outcome, whatever happened after it (a watchdog's exit, a kill at the time limit's edge)
        if result_file.is_file():
            r = json.loads(result_file.read_text())
            self.store.finish(job_id, r["status"], verdict=r.get("verdict"), summary=r.get("summary"),
                              error=r.get("error"), hint=r.get("hint"), timings=r.get("timings"))
            return
        if timed_out:
            self.store.finish(job_id, "failed", error=f"the job exceeded its time limit of "
                              f"{self.config.job_timeout_s:g} s and was stopped",
                              hint="a smaller model, or a server started with a larger --job-timeout")
            return
        if stopping:
            self.store.finish(job_id, "failed", error=INTERRUPTED)
            return
        how = (f"was killed by signal {signal.Signals(-exitcode).name}" if exitcode is not None and exitcode < 0
               else f"exited with code {exitcode} before writing a result")
        self.store.finish(job_id, "failed", error=f"the job's worker process {how} (a crash in the model, "
                          "a plugin or a native library); the server is unaffected",
                          hint=_last_line(jobdir / LOG))


def _last_line(log: Path) -> str | None:
    """The worker log's last line (a traceback ends with the exception), for the failed job's hint."""
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return None
    return f"the worker's last words: {lines[-1][:500]}" if lines else None
