"""The JSON API end to end through Starlette's TestClient, jobs in real worker processes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import pytest

import opbridge as ob

from .helpers import wait_job

GOLDEN = Path(__file__).resolve().parents[1] / "torchscript" / "golden"


def submit(client, model: Path, name: str | None = None, **fields):
    files = [("model", (name or model.name, model.read_bytes()))]
    if "weights" in fields:
        weights = fields.pop("weights")
        files.append(("weights", (weights.name, weights.read_bytes())))
    files += [("plugin", (p.name, p.read_bytes())) for p in fields.pop("plugins", [])]
    return client.post("/api/jobs", files=files, data=fields)


def test_job_converts_compiles_validates_and_serves_its_artefacts(make_client, small_onnx, tmp_path):
    client = make_client()
    r = submit(client, small_onnx, input_shape="image=1,3,16,16", target="bm1684")
    assert r.status_code == 202 and r.json()["status"] == "queued"
    job_id = r.json()["id"]
    job = wait_job(client, job_id)
    assert job["status"] == "done", job
    assert job["verdict"] == "pass" and job["model"] == "small_cnn.onnx" and job["target"] == "bm1684"
    assert set(job["timings"]) == {"convert", "save_obir", "compile", "save_obprog", "validate", "reports"}

    report = client.get(f"/api/jobs/{job_id}/report.json")
    assert report.status_code == 200 and report.json()["passed"] is True
    assert "onnxruntime" in report.json()["runners"]  # the origin framework was the reference
    html = client.get(f"/api/jobs/{job_id}/report.html")
    assert html.headers["content-type"].startswith("text/html") and "<html" in html.text.lower()

    # the artefacts load with the public API and describe the uploaded model (read here with onnx)
    proto = onnx.load(str(small_onnx))
    want = {i.name: tuple(d.dim_value for d in i.type.tensor_type.shape.dim) for i in proto.graph.input}
    (tmp_path / "m.obir").write_bytes(client.get(f"/api/jobs/{job_id}/model.obir").content)
    graph = ob.load(tmp_path / "m.obir")
    assert {v.name: tuple(v.shape) for v in graph.inputs} == want
    (tmp_path / "m.obprog").write_bytes(client.get(f"/api/jobs/{job_id}/model.obprog").content)
    assert {v.name for v in ob.load_program(tmp_path / "m.obprog").graph.inputs} == set(want)

    assert job_id in [j["id"] for j in client.get("/api/jobs").json()["jobs"]]
    assert client.get("/api/health").json()["jobs"]["done"] == 1
    assert client.delete(f"/api/jobs/{job_id}").json() == {"id": job_id, "deleted": True}
    assert client.get(f"/api/jobs/{job_id}").status_code == 404
    assert client.get(f"/api/jobs/{job_id}/report.json").status_code == 404


@pytest.mark.parametrize("path", ["/api/jobs/0123456789abcdef", "/api/jobs/0123456789abcdef/report.html",
                                  "/api/jobs/..%2F..%2Fjobs.sqlite3", "/api/jobs/nothex"])
def test_unknown_job_is_404_json(make_client, path):
    r = make_client().get(path)
    assert r.status_code == 404 and "no job" in r.json()["error"]


def test_artefact_of_a_failed_job_is_404(make_client, tmp_path):
    client = make_client()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf at all \xff\xfe")
    job_id = submit(client, bad).json()["id"]
    assert wait_job(client, job_id)["status"] == "failed"
    r = client.get(f"/api/jobs/{job_id}/report.html")
    assert r.status_code == 404 and "status failed" in r.json()["error"]


def test_malformed_model_fails_with_the_opbridge_error(make_client, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf at all \xff\xfe")
    with pytest.raises(ob.OpbridgeError) as expected:
        ob.convert(bad)
    client = make_client()
    job = wait_job(client, submit(client, bad).json()["id"])
    assert job["status"] == "failed" and job["verdict"] is None
    # the same message, with the server's stored file name in place of the client's path
    assert job["error"] == expected.value.message.replace(str(bad), str(Path(job["error"].split("'")[1])))
    assert "internal error" not in job["error"]


@pytest.mark.parametrize("name", ["model.exe", "model", ".onnx", "weights.caffemodel", "model.json"])
def test_model_with_a_refused_extension_is_400(make_client, small_onnx, name):
    r = submit(make_client(), small_onnx, name=name)
    assert r.status_code == 400 and "must end with one of" in r.json()["error"]


def test_client_file_name_is_never_a_path(make_client, small_onnx, tmp_path):
    client = make_client()
    job_id = submit(client, small_onnx, name="../../escape.onnx").json()["id"]
    assert wait_job(client, job_id)["status"] == "done"
    assert not (tmp_path / "escape.onnx").exists() and not (tmp_path / "data" / "escape.onnx").exists()
    stored = sorted(p.name for p in (tmp_path / "data" / "jobs" / job_id).iterdir())
    assert "model.onnx" in stored and not any("escape" in n for n in stored)


def test_upload_past_the_limit_is_413(make_client, small_onnx):
    assert small_onnx.stat().st_size > 2048
    r = submit(make_client(max_upload_mb=1 / 1024), small_onnx)  # 1 KiB
    assert r.status_code == 413 and "limit" in r.json()["error"]


def test_upload_past_the_limit_without_content_length_is_413(make_client, small_onnx):
    body = b"--b\r\nContent-Disposition: form-data; name=\"model\"; filename=\"m.onnx\"\r\n\r\n"
    body += small_onnx.read_bytes() + b"\r\n--b--\r\n"

    def chunks():
        for i in range(0, len(body), 512):
            yield body[i:i + 512]

    r = make_client(max_upload_mb=1 / 1024).post(
        "/api/jobs", content=chunks(), headers={"content-type": "multipart/form-data; boundary=b"})
    assert r.status_code == 413


def test_plugin_is_refused_unless_allowed(make_client, small_onnx, tmp_path):
    plugin = tmp_path / "p.py"
    plugin.write_text("raise SystemExit('must never run')\n")
    r = submit(make_client(), small_onnx, plugins=[plugin])
    assert r.status_code == 403 and "--allow-plugins" in r.json()["hint"]


@pytest.mark.parametrize("fields, message", [
    ({"input_shape": "image=1,x"}, "NAME=DIMS"),
    ({"target": "no-such-chip"}, "unknown target preset 'no-such-chip'"),
])
def test_bad_fields_are_400(make_client, small_onnx, fields, message):
    r = submit(make_client(), small_onnx, **fields)
    assert r.status_code == 400 and message in r.json()["error"]


def test_malformed_multipart_body_is_400(make_client):
    r = make_client().post("/api/jobs", content=b"--b\r\nno headers here",
                           headers={"content-type": "multipart/form-data"})  # and no boundary
    assert r.status_code == 400 and "multipart form" in r.json()["error"], r.text


def test_missing_model_is_400(make_client):
    r = make_client().post("/api/jobs", data={"target": "bm1684"})
    assert r.status_code == 400 and "'model'" in r.json()["error"]


def test_index_page_is_self_contained(make_client):
    r = make_client().get("/")
    assert r.status_code == 200 and "/api/jobs" in r.text
    assert "http://" not in r.text and "https://" not in r.text and "src=" not in r.text
    assert re.findall(r'href="([^"$]*)"', r.text) == ["data:,"]  # the icon; links are built by the script


def test_health(make_client):
    body = make_client(workers=3).get("/api/health").json()
    assert body["status"] == "ok" and body["workers"] == 3
    assert body["jobs"] == {"queued": 0, "running": 0, "done": 0, "failed": 0}
    assert json.dumps(body)


def test_torchscript_json_with_its_weights_under_another_name(make_client):
    client = make_client()
    job_id = submit(client, GOLDEN / "mlp_norms.ts.json", name="net.ts.json",
                    weights=GOLDEN / "mlp_norms.ts.safetensors").json()["id"]
    job = wait_job(client, job_id)
    assert job["status"] == "done" and job["verdict"] == "pass", job
    report = client.get(f"/api/jobs/{job_id}/report.json").json()
    assert report["framework"] == "torchscript" and report["passed"] is True


def test_torchscript_json_without_its_weights_fails_with_the_hint(make_client):
    client = make_client()
    job = wait_job(client, submit(client, GOLDEN / "mlp_norms.ts.json").json()["id"])
    assert job["status"] == "failed" and "does not exist" in job["error"], job


CAFFE_NET = """name: "tiny"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "out" }
"""


def test_caffe_net_with_its_caffemodel(make_client, tmp_path):
    from opbridge.cli import main

    (tmp_path / "deploy.prototxt").write_text(CAFFE_NET)
    assert main(["random-weights", str(tmp_path / "deploy.prototxt"), "-o", str(tmp_path / "net.caffemodel")]) == 0
    client = make_client()
    job_id = submit(client, tmp_path / "deploy.prototxt", weights=tmp_path / "net.caffemodel").json()["id"]
    job = wait_job(client, job_id)
    assert job["status"] == "done" and job["verdict"] == "pass", job
    assert client.get(f"/api/jobs/{job_id}/report.json").json()["framework"] == "caffe"


def test_second_server_on_the_same_data_is_refused(make_client, tmp_path, capsys):
    from opbridge.cli import main

    make_client()
    assert main(["serve", "--data", str(tmp_path / "data"), "--port", "1"]) == 2
    assert "another opbridge serve is using the data directory" in capsys.readouterr().err


def test_empty_file_inputs_of_a_browser_form_are_not_uploads(make_client, small_onnx):
    """A browser sends an empty <input type=file> as a part with an empty file name."""
    def part(name: str, filename: str, data: bytes) -> bytes:
        return (f'--b\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + b"\r\n"

    body = part("model", "m.onnx", small_onnx.read_bytes()) + part("weights", "", b"") + part("plugin", "", b"")
    r = make_client().post("/api/jobs", content=body + b"--b--\r\n",
                           headers={"content-type": "multipart/form-data; boundary=b"})
    assert r.status_code == 202, r.text


def test_job_converts_and_compiles_once(small_onnx, tmp_path, monkeypatch):
    """The validate step reuses the job's graph and program (each stage's time is its own work)."""
    import shutil

    from opbridge.serve import worker
    from opbridge.validate import api

    def again(*args, **kwargs):
        raise AssertionError("the validate step converted or compiled the model again")

    monkeypatch.setattr(api, "load_graph", again)
    monkeypatch.setattr(api, "compile_program", again)
    shutil.copy(small_onnx, tmp_path / "model.onnx")
    timings: dict[str, float] = {}
    result = worker._pipeline(tmp_path, {"model": "model.onnx"}, timings)
    assert result["status"] == "done" and result["verdict"] == "pass", result
    assert "onnxruntime" in (tmp_path / "report.json").read_text()
    assert (tmp_path / "model.obprog").is_file()
