"""Job state in SQLite (stdlib ``sqlite3``, WAL): the one record a restart starts from."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

STATUSES = ("queued", "running", "done", "failed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT UNIQUE NOT NULL,
    status TEXT NOT NULL,
    model_name TEXT NOT NULL,
    spec TEXT NOT NULL,
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    verdict TEXT,
    summary TEXT,
    error TEXT,
    hint TEXT,
    timings TEXT
)
"""

_COLUMNS = ("id", "status", "model_name", "spec", "created", "started", "finished", "verdict",
            "summary", "error", "hint", "timings")


class JobStore:
    """Jobs by id. One connection behind a lock: the scheduler's threads and the app share it,
    and every statement is short, so contention is negligible next to a job's run time."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(self, job_id: str, model_name: str, spec: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute("INSERT INTO jobs (id, status, model_name, spec, created) VALUES (?, ?, ?, ?, ?)",
                             (job_id, "queued", model_name, json.dumps(spec), time.time()))

    def get(self, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _as_dict(row) if row else None

    def recent(self, limit: int) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs ORDER BY seq DESC LIMIT ?",
                                    (limit,)).fetchall()
        return [_as_dict(r) for r in rows]

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall()
        return {s: 0 for s in STATUSES} | {s: n for s, n in rows}

    def claim_next(self) -> dict[str, Any] | None:
        """Mark the oldest queued job running and return it (None when nothing is queued)."""
        with self._lock:
            row = self._db.execute("SELECT id FROM jobs WHERE status = 'queued' ORDER BY seq LIMIT 1").fetchone()
            if row is None:
                return None
            self._db.execute("UPDATE jobs SET status = 'running', started = ? WHERE id = ?", (time.time(), row[0]))
        return self.get(row[0])

    def finish(self, job_id: str, status: str, *, verdict: str | None = None, summary: str | None = None,
               error: str | None = None, hint: str | None = None,
               timings: dict[str, float] | None = None) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET status = ?, finished = ?, verdict = ?, summary = ?, error = ?, hint = ?, "
                "timings = ? WHERE id = ?",
                (status, time.time(), verdict, summary, error, hint,
                 json.dumps(timings) if timings is not None else None, job_id))

    def delete(self, job_id: str) -> bool:
        with self._lock:
            return self._db.execute("DELETE FROM jobs WHERE id = ?", (job_id,)).rowcount > 0

    def fail_interrupted(self, reason: str) -> int:
        """At start: the jobs that were running when the server died can never finish; say so."""
        with self._lock:
            return self._db.execute(
                "UPDATE jobs SET status = 'failed', finished = ?, error = ? WHERE status = 'running'",
                (time.time(), reason)).rowcount


def lock_data_dir(data: Path) -> Any:
    """Take ``data``'s lock for this server's lifetime (returns the open lock file; closing it
    releases it). A second server on the same directory would fail the first one's running jobs
    as interrupted at its start, so it is refused."""
    import fcntl

    from ..errors import OpbridgeError

    data.mkdir(parents=True, exist_ok=True)
    f = open(data / "serve.lock", "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise OpbridgeError(f"another opbridge serve is using the data directory '{data}'",
                            hint="stop it, or give this server another --data") from None
    return f


def _as_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    job = dict(zip(_COLUMNS, row))
    job["spec"] = json.loads(job["spec"])
    job["timings"] = json.loads(job["timings"]) if job["timings"] else {}
    return job
