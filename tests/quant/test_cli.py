"""opbridge calibrate / quantize / validate --quantize: outputs, exit codes, one-line errors."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import opbridge as ob
from opbridge.cli import main
from tests.conftest import requires_ort
from tests.quant.helpers import cnn_model, cos, feeds


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("quant_cli")
    onnx.save(cnn_model(), d / "cnn.onnx")
    (d / "data").mkdir()
    for i, f in enumerate(feeds(4)):
        np.save(d / "data" / f"s{i}.npy", f["image"])
    np.savez(d / "data" / "s9.npz", image=feeds(1, seed=4)[0]["image"])
    return d


def _err(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


@pytest.mark.parametrize("method", ["minmax", "kl", "mse"])
def test_calibrate_quantize_validate(work, capsys, method):
    table, out = work / f"{method}.json", work / f"{method}.obir"
    assert main(["calibrate", str(work / "cnn.onnx"), "--data", str(work / "data"), "--method", method,
                 "--samples", "3", "-o", str(table)]) == 0
    assert "3 samples" in capsys.readouterr().out
    data = json.loads(table.read_text())
    assert data["method"] == method and data["samples"] == 3 and "conv1_out" in data["tensors"]
    assert main(["quantize", str(work / "cnn.onnx"), "--table", str(table), "-o", str(out)]) == 0
    assert "4 int8 layers" in capsys.readouterr().out
    g, q = ob.convert(str(work / "cnn.onnx")), ob.load(out)
    f = feeds(1, seed=8)[0]
    assert cos(ob.interpret(g, {"image": f["image"]})["prob"], ob.interpret(q, f)["prob"]) > 0.999
    rc = main(["validate", str(work / "cnn.onnx"), "--quantize", str(table), "--report",
               str(work / "r.json")])
    report = json.loads((work / "r.json").read_text())
    assert report["runners"] == ["float", "int8"] and report["rows"]
    assert rc == (0 if report["passed"] else 1)
    assert any("error grows most at layer" in n for n in report["notes"])
    # the quantized .obir itself, against its float source: the same comparisons
    assert main(["validate", str(work / "cnn.onnx"), "--quantize", str(out), "--report",
                 str(work / "r2.json")]) == rc
    again = json.loads((work / "r2.json").read_text())
    assert [r["cosine"] for r in again["rows"]] == [r["cosine"] for r in report["rows"]]


def test_quantize_f16_and_mixed(work, capsys):
    assert main(["quantize", str(work / "cnn.onnx"), "--dtype", "f16", "-o", str(work / "h.obir")]) == 0
    assert ob.load(work / "h.obir").metadata["quant.dtype"] == "f16"
    main(["calibrate", str(work / "cnn.onnx"), "--data", str(work / "data"), "-o", str(work / "t.json")])
    capsys.readouterr()
    assert main(["quantize", str(work / "cnn.onnx"), "--table", str(work / "t.json"), "--mixed-precision",
                 "auto", "--target-cos", "0.99999", "--data", str(work / "data"), "-o",
                 str(work / "m.obir")]) == 0
    out = capsys.readouterr().out
    assert "mixed precision: output cosine" in out and "kept in float:" in out
    assert main(["quantize", str(work / "cnn.onnx"), "--table", str(work / "t.json"), "--bias-correction",
                 "--data", str(work / "data"), "-o", str(work / "bc.obir")]) == 0
    assert ob.load(work / "bc.obir").metadata["quant.bias_correction"] == "4 layers"


def _bad_cases(work):
    onnx_path = str(work / "cnn.onnx")
    (work / "empty").mkdir(exist_ok=True)
    (work / "wrong").mkdir(exist_ok=True)
    np.save(work / "wrong" / "a.npy", np.zeros((1, 3, 8, 8), np.float32))
    (work / "ints").mkdir(exist_ok=True)
    np.save(work / "ints" / "a.npy", np.zeros((1, 3, 16, 16), np.bool_))
    (work / "junk").mkdir(exist_ok=True)
    (work / "junk" / "a.npy").write_bytes(b"not numpy")
    ob.calibrate(ob.convert(onnx_path), str(work / "data")).save(work / "cnn_table.json")
    other = work / "other.json"
    other.write_text(json.dumps({"format": "opbridge-calibration", "version": 1, "graph": "x",
                                 "tensors": {"a": {"min": 0, "max": 1, "threshold": 1}}}))
    return {
        "empty folder": (["calibrate", onnx_path, "--data", str(work / "empty"), "-o", "t.json"],
                         "no readable samples"),
        "missing folder": (["calibrate", onnx_path, "--data", str(work / "nope"), "-o", "t.json"],
                           "does not exist"),
        "wrong shape": (["calibrate", onnx_path, "--data", str(work / "wrong"), "-o", "t.json"],
                        r"wants shape \[1,3,16,16\], got \[1,3,8,8\]"),
        "wrong dtype": (["calibrate", onnx_path, "--data", str(work / "ints"), "-o", "t.json"],
                        "wants f32, got bool"),
        "unreadable": (["calibrate", onnx_path, "--data", str(work / "junk"), "-o", "t.json"],
                       "not a readable numpy file"),
        "table of another graph": (["quantize", onnx_path, "--table", str(other), "-o", "q.obir"],
                                   r"has no range for 7 tensor"),
        "no table": (["quantize", onnx_path, "-o", "q.obir"], "needs a calibration table"),
        "bias correction without data": (["quantize", onnx_path, "--table", str(work / "cnn_table.json"),
                                          "--bias-correction", "-o", "q.obir"], "needs calibration samples"),
        "missing table": (["quantize", onnx_path, "--table", str(work / "none.json"), "-o", "q.obir"],
                          "does not exist"),
    }


CASES = ["empty folder", "missing folder", "wrong shape", "wrong dtype", "unreadable",
         "table of another graph", "no table", "missing table", "bias correction without data"]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_2_with_error_and_hint(work, capsys, case):
    argv, match = _bad_cases(work)[case]
    assert main(argv) == 2
    lines = _err(capsys)
    assert lines[0].startswith("error: ") and "Traceback" not in "\n".join(lines)
    import re

    assert re.search(match, lines[0]), lines
    assert len(lines) == 2 and lines[1].startswith("hint: "), lines


def test_unsupported_dtype_is_a_usage_error(work, capsys):
    with pytest.raises(SystemExit) as e:
        main(["quantize", str(work / "cnn.onnx"), "--dtype", "int4", "-o", "q.obir"])
    assert e.value.code == 2
    assert "invalid choice: 'int4'" in capsys.readouterr().err


def test_calibrate_crops_images(work, capsys):
    from PIL import Image

    (work / "imgs").mkdir()
    rng = np.random.default_rng(0)
    for i in range(2):
        Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)).save(work / "imgs" / f"{i}.png")
    assert main(["calibrate", str(work / "cnn.onnx"), "--data", str(work / "imgs"), "--crops", "2",
                 "-o", str(work / "crops.json")]) == 0
    assert "6 samples" in capsys.readouterr().out  # each image whole and 2 crops of it
    assert json.loads((work / "crops.json").read_text())["samples"] == 6


def _gain_model() -> onnx.ModelProto:
    """A Conv whose input is scaled by a second graph input ``gain`` (shape [1])."""
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Mul", ["image", "gain"], ["scaled"]),
         helper.make_node("Conv", ["scaled", "w"], ["out"], pads=[1, 1, 1, 1])],
        "gain", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16]),
                 helper.make_tensor_value_info("gain", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 16, 16])],
        initializer=[numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@requires_ort
def test_calibrate_and_quantize_take_input_value(work, capsys):
    import onnxruntime as ort

    model = work / "gain.onnx"
    onnx.save(_gain_model(), model)
    table, out = work / "gain.json", work / "gain.obir"
    # the calibration data holds only "image": "gain" is bound, so it is no input any more
    assert main(["calibrate", str(model), "--input-value", "gain=0.5", "--data", str(work / "data"),
                 "-o", str(table)]) == 0
    assert main(["quantize", str(model), "--input-value", "gain=0.5", "--table", str(table),
                 "-o", str(out)]) == 0
    capsys.readouterr()
    q = ob.load(out)
    assert [v.name for v in q.inputs] == ["image"]
    x = feeds(1, seed=9)[0]["image"]
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"image": x, "gain": np.array([0.5], np.float32)})[0]
    assert cos(ref, ob.interpret(q, {"image": x})["out"]) > 0.999
    # an .obir is converted already: the binding is refused with a hint
    assert main(["quantize", str(out), "--input-value", "gain=0.5", "--table", str(table), "-o",
                 str(work / "again.obir")]) == 2
    lines = _err(capsys)
    assert "--input-value binds inputs while converting" in lines[0] and lines[1].startswith("hint: ")
