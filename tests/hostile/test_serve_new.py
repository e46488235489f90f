"""Hostile requests to ``opbridge serve``'s JSON API, against a real server on a free port
(urllib, as any client): every refusal is a JSON ``{"error", "hint"}`` with a 4xx status and a
hint, unknown or repeated form fields are refused instead of dropped, and a job's error does not
show the server's data directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

pytest.importorskip("starlette", reason="opbridge serve needs the 'serve' extra (in the 'test' extra too)")

from ..serve.helpers import free_port  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("serve") / "data"
    port = free_port()
    log = open(data.parent / "serve.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "opbridge", "serve", "--port", str(port), "--data", str(data),
                             "--workers", "1", "--max-upload-mb", "1"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/api/health", timeout=2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"opbridge serve did not start: {(data.parent / 'serve.log').read_text()[-2000:]}")
            time.sleep(0.2)
    yield url, data
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    log.close()


def request(url, method, path, body=None, headers=None):
    req = urllib.request.Request(url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as err:
        raw = err.read()
        try:
            return err.code, json.loads(raw)
        except ValueError:
            return err.code, raw


def multipart(*fields):
    """(name, value, filename or None) -> body and headers of a multipart/form-data POST."""
    b = uuid.uuid4().hex
    out = b""
    for name, value, filename in fields:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        data = value if isinstance(value, bytes) else value.encode()
        out += f"--{b}\r\nContent-Disposition: {disp}\r\n\r\n".encode() + data + b"\r\n"
    return out + f"--{b}--\r\n".encode(), {"Content-Type": f"multipart/form-data; boundary={b}"}


def _refused(status, body, code, *names):
    assert status == code, body
    assert isinstance(body, dict) and body.get("error") and body.get("hint"), body
    for name in names:
        assert name in body["error"], body


MODEL = ("model", b"not an onnx model", "m.onnx")


# unknown fields were dropped: a misspelt 'input_shapes' ran the job without the shape
@pytest.mark.parametrize("fields, named", [
    ([MODEL, ("input_shapes", "image=2,3,16,16", None)], "'input_shapes'"),
    ([MODEL, ("kind", "exec", None)], "'kind'"),
    ([MODEL, ("target", "bm1684", None), ("target", "bm1684x", None)], "'target' 2 times"),
    ([MODEL, MODEL], "'model' 2 times"),
    ([MODEL, ("input_shape", "image=1,3,16,16", None), ("input_shape", "image=2,3,16,16", None)],
     "'image' twice"),
], ids=["input_shapes", "kind", "target-twice", "model-twice", "input_shape-twice"])
def test_unknown_or_repeated_fields_are_400(server, fields, named):
    url, _ = server
    _refused(*request(url, "POST", "/api/jobs", *multipart(*fields)), 400, named)


# these 4xx answers had "hint": null, and 405 was plain text
@pytest.mark.parametrize("method, path, fields, code, named", [
    ("POST", "/api/jobs", [("model", b"x", "m.exe")], 400, "'m.exe'"),
    ("POST", "/api/jobs", [("model", b"x", "m.onnx\x00.txt")], 400, "\\x00"),
    ("POST", "/api/jobs", [MODEL, ("weights", b"x", "w.txt")], 400, "'w.txt'"),
    ("POST", "/api/jobs", [MODEL, ("input_shape", "=", None)], 400, "input_shape"),
    ("POST", "/api/jobs", [MODEL, ("input_shape", "image=" + ",".join(["1"] * 1000), None)], 400, "more than 64"),
    ("GET", "/api/jobs/0123456789abcdef", None, 404, "no job"),
    ("DELETE", "/api/jobs/" + "a" * 5000, None, 404, "no job"),
    ("GET", "/api/jobs/0123456789abcdef/report.html", None, 404, "no job"),
    ("PUT", "/api/jobs", None, 405, "PUT"),
    ("DELETE", "/api/health", None, 405, "DELETE"),
], ids=["model-ext", "model-nul", "weights-ext", "input_shape-=", "input_shape-rank", "get-none", "delete-long",
        "artefact-none", "put", "delete-health"])
def test_every_refusal_has_a_hint(server, method, path, fields, code, named):
    url, _ = server
    body, headers = multipart(*fields) if fields else (None, {})
    status, answer = request(url, method, path, body, headers)
    _refused(status, answer, code, named)
    assert len(answer["error"]) < 400


def _wait(url, job_id, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        _, job = request(url, "GET", f"/api/jobs/{job_id}")
        if job["status"] in ("done", "failed") or time.monotonic() > deadline:
            return job
        time.sleep(0.2)


# the job's error named the model by its path under the server's data directory
def test_job_error_does_not_show_the_servers_paths(server):
    url, data = server
    status, answer = request(url, "POST", "/api/jobs", *multipart(MODEL))
    assert status == 202, answer
    job = _wait(url, answer["id"])
    assert job["status"] == "failed" and "model.onnx" in job["error"] and job["hint"], job
    assert str(data) not in json.dumps(job)


# a .ts.json whose JSON nests too deeply was an internal error (RecursionError) in the worker
def test_deeply_nested_torchscript_json_is_a_user_error(server):
    url, _ = server
    fields = [("model", b"[" * 100000, "m.ts.json"), ("weights", b"x", "m.ts.safetensors")]
    status, answer = request(url, "POST", "/api/jobs", *multipart(*fields))
    assert status == 202, answer
    job = _wait(url, answer["id"])
    assert job["status"] == "failed" and "nested too deeply" in job["error"], job
    assert "internal error" not in job["error"] and job["hint"]


def test_mutation_driver(server):
    """Malformed bodies of every kind: a 4xx JSON error with a hint, or a queued job; the server
    never answers 5xx and stays up."""
    url, _ = server
    json_type = {"Content-Type": "application/json"}
    raw = [(b, json_type) for b in (b"", b"{", b"null", b'{"model": 1}', b"\xff\xfe", b"[" * 100000,
                                     b'{"a": ' + b"1" * 5000 + b"}")]
    raw += [(b"model=abc", {"Content-Type": "application/x-www-form-urlencoded"}), (b"abc", {}),
            (b"--\r\n", {"Content-Type": "multipart/form-data; boundary="}),
            (b"--zz\r\nno headers\r\n--zz--\r\n", {"Content-Type": "multipart/form-data; boundary=zz"})]
    names = ["../../../etc/passwd.onnx", "..\\x.onnx", "/abs/m.onnx", ".onnx", "m.ONNX", "m", "", "m.ts.json"]
    raw += [multipart(("model", b"x", n)) for n in names]
    raw += [multipart(MODEL, ("target", t, None)) for t in ("", "../../x", "bm1684" * 1000, "\x00")]
    n = 0
    for body, headers in raw:
        status, answer = request(url, "POST", "/api/jobs", body, headers)
        n += 1
        assert status < 500, (body[:40], answer)
        if status != 202:
            _refused(status, answer, status)
    assert n == len(raw) > 20
    assert request(url, "GET", "/api/health")[0] == 200
