"""``input_values`` / ``--input-value``: bind an input to a constant and fold what it decides,
checked against onnxruntime fed the same value."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import opbridge as ob
from tests.conftest import requires_ort

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

pytestmark = requires_ort


def vad_like(path=None):
    """Branches on the sample rate (If), and frames the signal by sr // 100 samples."""
    c = numpy_helper.from_array
    then = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
                             [c(np.array(2, np.float32), "two")])
    other = helper.make_graph([helper.make_node("Mul", ["x", "three"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)],
                              [c(np.array(3, np.float32), "three")])
    nodes = [helper.make_node("Equal", ["sr", "k16"], ["is16"]),
             helper.make_node("If", ["is16"], ["scaled"], then_branch=then, else_branch=other),
             helper.make_node("Div", ["sr", "hundred"], ["win"]),
             helper.make_node("Reshape", ["win", "one"], ["win1"]),
             helper.make_node("Concat", ["minus1", "win1"], ["frame"], axis=0),
             helper.make_node("Reshape", ["scaled", "frame"], ["frames"]),
             helper.make_node("ReduceMean", ["frames"], ["y"], axes=[1], keepdims=0)]
    inits = [c(np.array(16000, np.int64), "k16"), c(np.array(100, np.int64), "hundred"),
             c(np.array([1], np.int64), "one"), c(np.array([-1], np.int64), "minus1")]
    g = helper.make_graph(nodes, "vad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1600]),
                                         helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    if path is not None:
        onnx.save(m, str(path))
    return m


def _ort(model, feeds):
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("sr", [16000, 8000])
def test_bound_input_folds_branch_and_shapes(sr):
    m = vad_like()
    g = ob.convert(m, input_values={"sr": sr})
    assert [v.name for v in g.inputs] == ["x"]
    assert "If" not in g.op_counts() and all(isinstance(d, int) for v in g.values().values() for d in v.shape)
    x = np.random.default_rng(sr).standard_normal((1, 1600)).astype(np.float32)
    got = ob.interpret(g, {"x": x})["y"]
    want = _ort(m, {"x": x, "sr": np.array(sr, np.int64)})[0]
    assert got.shape == want.shape == (1600 // (sr // 100),)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    ob.compile(g, "bm1684")  # the frozen graph is static: it compiles


@pytest.mark.parametrize("values,match", [
    ({"rate": 16000}, r"names 'rate', which is not an input.*\n.*inputs are: x, sr"),
    ({"sr": 16000.5}, r"input_values\['sr'\] = 16000.5: input 'sr' is int64.*not a whole number"),
    ({"sr": [1, 2]}, r"input_values\['sr'\] has 2 element\(s\); input 'sr' is declared \[\]"),
], ids=["unknown-name", "not-integer", "wrong-size"])
def test_bad_input_values_are_named(values, match):
    with pytest.raises(ob.ShapeError, match=match):
        ob.convert(vad_like(), input_values=values)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "opbridge", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_cli_input_value(tmp_path):
    vad_like(tmp_path / "vad.onnx")
    r = _cli("convert", tmp_path / "vad.onnx", "--input-value", "sr=8000", "-o", tmp_path / "v.obir")
    assert r.returncode == 0, r.stderr
    assert [v.name for v in ob.load(tmp_path / "v.obir").inputs] == ["x"]
    r = _cli("compile", tmp_path / "vad.onnx", "--input-value", "sr=16000", "-o", tmp_path / "v.obprog")
    assert r.returncode == 0, r.stderr
    r = _cli("convert", tmp_path / "vad.onnx", "--input-value", "sr=fast", "-o", tmp_path / "v.obir")
    assert r.returncode == 2 and "'fast' is not a number" in r.stderr


def test_help_explains_input_value():
    r = _cli("convert", "--help")
    assert "--input-value NAME=VALUE" in r.stdout and "fold" in r.stdout


def test_validate_feeds_the_bound_value_to_onnxruntime(tmp_path):
    vad_like(tmp_path / "vad.onnx")
    r = ob.validate(str(tmp_path / "vad.onnx"), input_values={"sr": 8000}, target="bm1684")
    assert r.passed and r.runners[0] == "onnxruntime" and not r.errors, (r.runners, r.errors)
    ys = [row for row in r.rows if row.tensor == "y"]
    assert ys and all(row.result.ref_shape == (1600 // 80,) for row in ys)
    r = _cli("validate", tmp_path / "vad.onnx", "--input-value", "sr=16000", "--no-simulator")
    assert r.returncode == 0, r.stdout + r.stderr


def test_batch_convert_binds_input_values(tmp_path):
    vad_like(tmp_path / "vad.onnx")
    res = ob.batch("convert", [tmp_path / "vad.onnx"], output=tmp_path / "out", jobs=1,
                   input_values={"sr": 8000})
    assert res.exit_code == 0
    graphs = list((tmp_path / "out").rglob("model.obir"))
    assert len(graphs) == 1 and [v.name for v in ob.load(graphs[0]).inputs] == ["x"]
