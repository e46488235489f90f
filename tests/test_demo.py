"""``opbridge demo``: the README's first quick-start command converts, compiles, runs and validates
the bundled examples and exits 0."""

from __future__ import annotations

import io
import json
import sys

import pytest

from opbridge.cli import main
from tests.conftest import HAVE_CV2, HAVE_ORT, SHARED_MODELS, requires_ort, requires_shared_models


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    """The demo on the bundled examples, run once for the module: (exit code, stdout, out dir)."""
    out = tmp_path_factory.mktemp("demo")
    capture = pytest.MonkeyPatch()
    buf = io.StringIO()
    capture.setattr(sys, "stdout", buf)
    try:
        rc = main(["demo", "--out-dir", str(out)])
    finally:
        capture.undo()
    return rc, buf.getvalue(), out


def test_exit_0(bundled):
    rc, text, _ = bundled
    assert rc == 0, text


@pytest.mark.parametrize("name", ["fire_net", "small_cnn"])
def test_each_model_passes_and_leaves_files(bundled, name):
    _, text, out = bundled
    for suffix in (".obir", ".obprog", ".validate.json", ".trace.json"):
        assert (out / f"{name}{suffix}").is_file(), suffix
    report = json.loads((out / f"{name}.validate.json").read_text())
    assert report["passed"] is True and report["rows"]
    assert "simulator" in report["runners"]
    assert f"PASS: {len(report['rows'])} comparisons of {name}" in text


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed (extra 'validate')")
def test_onnx_example_checked_against_onnxruntime(bundled):
    _, _, out = bundled
    report = json.loads((out / "small_cnn.validate.json").read_text())
    assert report["reference"] == "onnxruntime"
    assert {"leaky1_out", "prob"} <= {r["tensor"] for r in report["rows"]}


@pytest.mark.skipif(not HAVE_CV2, reason="opencv-python-headless<5 is not installed (extra 'test')")
def test_caffe_example_checked_against_opencv(bundled):
    _, _, out = bundled
    report = json.loads((out / "fire_net.validate.json").read_text())
    assert report["reference"] == "opencv"
    assert (out / "fire_net.caffemodel").is_file()
    assert {"fire2/concat", "prob"} <= {r["tensor"] for r in report["rows"]}


def test_summary_and_profile_printed(bundled):
    _, text, _ = bundled
    assert "estimated latency" in text and "layer groups" in text
    assert "opbridge demo" in text


@requires_ort
def test_given_onnx_file(tmp_path, capsys):
    from opbridge.examples import write_small_cnn_onnx

    model = write_small_cnn_onnx(tmp_path / "mine.onnx", seed=1)
    assert main(["demo", model, "--out-dir", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "mine.obprog").is_file()
    assert "PASS" in capsys.readouterr().out


@pytest.mark.parametrize("what", ["missing", "empty-folder"])
def test_bad_model_path_is_user_error(tmp_path, capsys, what):
    path = tmp_path / "nope.onnx" if what == "missing" else tmp_path
    assert main(["demo", str(path), "--out-dir", str(tmp_path / "out")]) == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.slow
@requires_shared_models
def test_shared_caffe_model(tmp_path, capsys):
    assert main(["demo", str(SHARED_MODELS / "caffe" / "squeezenet_v1.1"), "--out-dir", str(tmp_path)]) == 0
    assert "PASS" in capsys.readouterr().out


def test_without_origin_frameworks(tmp_path, monkeypatch, capsys):
    # a fresh install has neither onnxruntime nor OpenCV (extras): the interpreter is the reference
    from opbridge.validate import api

    monkeypatch.setattr(api, "origin_runner_name", lambda framework: None)
    assert main(["demo", "--out-dir", str(tmp_path)]) == 0
    for name in ("fire_net", "small_cnn"):
        report = json.loads((tmp_path / f"{name}.validate.json").read_text())
        assert report["runners"] == ["interpreter", "simulator"] and report["passed"]
    assert "the interpreter is the reference" in capsys.readouterr().out


@requires_ort
def test_a_bad_model_is_reported_and_the_others_run(tmp_path, capsys):
    from opbridge.examples import write_small_cnn_onnx

    good = write_small_cnn_onnx(tmp_path / "good.onnx")
    bad = tmp_path / "bad.prototxt"
    bad.write_text('name: "bad"\nlayer { name: "data" type: "Input" top: "data" '
                   'input_param { shape { dim: 1 dim: 3 dim: 4 dim: 4 } } }\n'
                   'layer { name: "odd" type: "NoSuchLayer" bottom: "data" top: "y" }\n')
    assert main(["demo", str(bad), good, "--out-dir", str(tmp_path / "out")]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "error:" in out and "NoSuchLayer" in out
    assert "PASS:" in out and (tmp_path / "out" / "good.obprog").is_file()


@requires_ort
def test_input_shape_fixes_symbolic_dims(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "dyn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8),
              str(tmp_path / "dyn.onnx"))
    args = ["demo", str(tmp_path / "dyn.onnx"), "--out-dir", str(tmp_path / "out")]
    assert main(args) == 2
    assert "symbolic dim" in capsys.readouterr().out
    assert main([*args, "--input-shape", "x=3,4"]) == 0
