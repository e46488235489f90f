"""The files a job's worker writes for others to poll are whole whenever they are visible.

The restart test and an operator read ``worker.pid`` as soon as it exists; a plain write creates
the file empty and fills it a moment later, and a CI run read it in that moment (int('')). Here a
reader looks inside every write the worker makes, at the moment a plain write's file is empty.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def test_worker_pid_and_result_are_never_seen_empty(tmp_path):
    jobdir = tmp_path / "job"
    jobdir.mkdir()
    (jobdir / "spec.json").write_text(json.dumps({"model": "absent.onnx"}))
    seen = tmp_path / "seen.json"
    script = textwrap.dedent(f"""
        import json, pathlib
        jobdir = pathlib.Path({str(jobdir)!r})
        seen = []
        plain = pathlib.Path.write_text

        def looking(self, data, *args, **kwargs):
            with open(self, "w"):  # the moment a plain write has created the file, not yet filled it
                for name in ("worker.pid", "result.json"):
                    f = jobdir / name
                    if f.exists() and f.read_text() == "":
                        seen.append(name)
            return plain(self, data, *args, **kwargs)

        pathlib.Path.write_text = looking
        from opbridge.serve.worker import run_job
        run_job(str(jobdir))
        pathlib.Path({str(seen)!r}).write_text(json.dumps(seen))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + (jobdir / "worker.log").read_text()
    assert json.loads(seen.read_text()) == []
    # the files themselves are complete and the job's failure is its result
    assert int((jobdir / "worker.pid").read_text()) > 0
    assert json.loads((jobdir / "result.json").read_text())["status"] == "failed"
    assert not list(jobdir.glob(".*.tmp"))
