"""What the hostile-input checks must still accept, and the JSON, array and program readers
they share: a table calibration writes loads again, a batch takes the target files the
single-model commands take, every JSON reader refuses an integer past Python's digit limit
as a user error, an .npz member is held once, and a program's load checks walk the graph once."""

from __future__ import annotations

import json
import shutil
import tracemalloc

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.arrayfile import read_array_file
from opbridge.quant import CalibrationTable

from .conftest import assert_one_error_and_hint, cli


def _exp_conv_model(path) -> None:
    """x -> Exp -> Conv (channel 1 only its bias, 1e-44: a near-dead channel) -> Conv."""
    w1 = np.zeros((2, 2, 1, 1), np.float32)
    w1[0, 0] = 1.0
    b1 = np.array([0.0, 1e-44], np.float32)
    w2 = np.random.default_rng(0).standard_normal((3, 2, 1, 1)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Conv", ["e", "w1", "b1"], ["c1"]),
         helper.make_node("Conv", ["c1", "w2"], ["y"])], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(w2, "w2")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


# exp(-100) is 3.78e-44, a float32 subnormal: calibration wrote it as a threshold (and as a
# channel's maximum), and loading the table it had just saved refused it
@pytest.mark.parametrize("channel0", [-100.0, 0.0], ids=["all-subnormal", "one-subnormal-channel"])
def test_a_saved_table_with_subnormal_ranges_loads_and_quantizes(tmp_path, capsys, channel0):
    model = tmp_path / "m.onnx"
    _exp_conv_model(model)
    g = ob.convert(model)
    x = np.full((1, 2, 4, 4), -100.0, np.float32)
    x[:, 0] = channel0
    table = ob.calibrate(g, [{"x": x}], channel_activations=True)
    assert 0 < table.tensors["e"].channels[1] < 1e-38  # the case: a subnormal the file keeps
    p = tmp_path / "t.json"
    table.save(p)
    assert CalibrationTable.load(p).tensors == table.tensors
    q = ob.quantize(g, p)
    got = ob.interpret(q, {"x": x})["y"]
    want = onnxruntime.InferenceSession(str(model)).run(None, {"x": x})[0]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, atol=0.02 * max(float(np.abs(want).max()), 1e-30))
    scales = [np.asarray(v.quant.scale) for n in q.nodes for v in n.outputs if v.quant is not None]
    assert scales and all(np.isfinite(s).all() and (s > 0).all() for s in scales)
    rc, err = cli(["quantize", str(model), "--table", str(p), "-o", str(tmp_path / "q.obir")], capsys)
    assert rc == 0, err


def _target_file(tmp_path):
    p = tmp_path / "my.json"
    ob.Target.preset("bm1684", clock_mhz=400.0).save(p)
    return p


# 'batch validate --target my.json' was refused as an unknown preset, though 'validate
# --target my.json' takes it
@pytest.mark.parametrize("mode", ["validate", "compile"])
def test_batch_takes_a_target_file(cnn, tmp_path, capsys, mode):
    model = shutil.copy(cnn[0], tmp_path / "good.onnx")
    out = tmp_path / "out"
    rc, err = cli(["batch", mode, str(model), "-o", str(out), "--jobs", "1", "--target", str(_target_file(tmp_path))],
                  capsys)
    assert rc == 0, err
    (row,) = json.loads((out / "summary.json").read_text())["models"]
    assert row["status"] == "passed", row
    if mode == "compile":
        assert ob.load_program(out / row["name"] / "model.obprog").target.clock_mhz == 400.0


def test_batch_convert_ignores_the_target(cnn, tmp_path, capsys):
    model = shutil.copy(cnn[0], tmp_path / "good.onnx")
    rc, err = cli(["batch", "convert", str(model), "-o", str(tmp_path / "out"), "--jobs", "1",
                   "--target", "no-such-preset"], capsys)
    assert rc == 0, err


def test_batch_refuses_a_bad_target_file_once(cnn, tmp_path, capsys):
    model = shutil.copy(cnn[0], tmp_path / "good.onnx")
    bad = tmp_path / "bad.json"
    bad.write_text('{"lanes": ' + "1" * 5000 + "}")
    rc, err = cli(["batch", "compile", str(model), "-o", str(tmp_path / "out"), "--target", str(bad)], capsys)
    assert_one_error_and_hint(rc, err, str(bad))
    assert not (tmp_path / "out" / "summary.json").exists()


# an integer past Python's 4300-digit limit is a ValueError json's decoder does not wrap:
# 'opbridge convert big.ts.json' printed "internal error: ValueError: Exceeds the limit"
def test_torchscript_json_with_a_huge_integer(tmp_path, capsys):
    p = tmp_path / "big.ts.json"
    p.write_text('{"format": "opbridge.torchscript-json", "version": ' + "1" * 5000 + "}")
    rc, err = cli(["convert", str(p), "-o", str(tmp_path / "o.obir")], capsys)
    assert_one_error_and_hint(rc, err, str(p), "not valid JSON")


def test_safetensors_header_with_a_huge_integer(tmp_path, capsys):
    header = ('{"__metadata__": {"format": "opbridge.obir"}, "x": {"dtype": "F32", "shape": ['
              + "1" * 5000 + '], "data_offsets": [0, 4]}}').encode()
    p = tmp_path / "big.obir"
    p.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4)
    with pytest.raises(ob.ModelFormatError, match="not JSON"):
        ob.load(p)
    rc, err = cli(["show", str(p)], capsys)
    assert_one_error_and_hint(rc, err, str(p))


# the same JSON failures through every reader that had its own copy of the handling
def test_json_readers_share_one_handling(tmp_path):
    from opbridge.quant import QuantError

    for text in ('{"a": ' + "1" * 5000 + "}", "[" * 100000, b"\xff\xfe{}", "[1, 2]"):
        p = tmp_path / "f.json"
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(QuantError, match="calibration table") as qerr:
            CalibrationTable.load(p)
        with pytest.raises(ob.ModelFormatError, match="target file") as terr:
            ob.Target.load(p)
        assert qerr.value.hint and terr.value.hint


# an .npz member was read as bytes and then copied into its array: twice its size at peak
@pytest.mark.parametrize("save", [np.savez, np.savez_compressed], ids=["stored", "compressed"])
def test_npz_member_is_held_once(tmp_path, save):
    a = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)  # 4 MiB
    p = tmp_path / "a.npz"
    save(p, a=a, f=np.asfortranarray(a[:8, :16]))
    tracemalloc.start()
    try:
        got = read_array_file(p)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(got, dict)
    np.testing.assert_array_equal(got["a"], a)
    np.testing.assert_array_equal(got["f"], a[:8, :16])
    assert peak < 1.5 * a.nbytes, peak


# the load checks walked the whole graph (graph.values()) once per compute instruction
def test_program_load_walks_the_graph_once(cnn, tmp_path, monkeypatch):
    from opbridge.ir.graph import Graph
    from opbridge.simulator.schema import Compute

    _, g, _ = cnn
    prog = ob.compile(g)
    prog.save(tmp_path / "m.obprog")
    computes = sum(isinstance(i, Compute) for i in prog.instrs)
    assert computes > 8
    calls = []
    walk = Graph.values
    monkeypatch.setattr(Graph, "values", lambda self: calls.append(1) or walk(self))
    ob.load_program(tmp_path / "m.obprog")
    # a few walks in all (reading and checking), not one or two per compute instruction
    assert len(calls) <= 4 < computes, (len(calls), computes)
