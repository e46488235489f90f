"""Crafted hostile inputs: each gives an OpbridgeError naming what is wrong, never a crash."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import opbridge as ob

from . import seeds
from .mutate import judge

F = onnx.TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "crafted", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return m


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _save(tmp_path, m, name="m.onnx"):
    p = tmp_path / name
    p.write_bytes(m.SerializeToString())
    return p


def _expect(tmp_path, m, match, exc=ob.OpbridgeError):
    p = _save(tmp_path, m)
    out = judge("crafted", lambda: ob.convert(p))
    assert out.ok, out.detail
    with pytest.raises(exc, match=match):
        ob.convert(p)


def test_cycle(tmp_path):
    m = _model([helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
                helper.make_node("Relu", ["a"], ["b"], name="n2")], [_vi("x", [2])], [_vi("b", [2])])
    _expect(tmp_path, m, r"cycle|before|not (produced|defined)")


def test_undefined_input(tmp_path):
    m = _model([helper.make_node("Relu", ["ghost"], ["y"], name="r")], [_vi("x", [2])], [_vi("y", [2])])
    _expect(tmp_path, m, r"'ghost'")


def test_attribute_of_wrong_type(tmp_path):
    m = _model([helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha="high")],
               [_vi("x", [2])], [_vi("y", [2])])
    _expect(tmp_path, m, r"'lr'.*alpha")


def test_opset_zero(tmp_path):
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", [2])], [_vi("y", [2])], opset=0)
    _expect(tmp_path, m, r"opset|version|Relu")


def test_opset_from_the_future_is_refused(tmp_path):
    """An opset newer than the onnx package knows is refused, naming it and the newest known
    one, rather than read with the newest schemas."""
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", [2])], [_vi("y", [2])], opset=999)
    newest = onnx.defs.onnx_opset_version()
    _expect(tmp_path, m, rf"opset 999 .*knows opsets up to {newest}\b", ob.ModelFormatError)


def test_newest_known_opset_is_read(tmp_path):
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", [2])], [_vi("y", [2])],
               opset=onnx.defs.onnx_opset_version())
    g = ob.convert(_save(tmp_path, m))
    x = np.array([-1.0, 2.0], np.float32)
    np.testing.assert_array_equal(ob.interpret(g, {"x": x})["y"], np.maximum(x, 0))


def test_initializer_size_disagrees_with_dims(tmp_path):
    t = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    t.dims[:] = [1000, 1000]
    m = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [_vi("x", [4])], [_vi("y", [4])], [t])
    _expect(tmp_path, m, r"'w'")


def test_huge_declared_dims(tmp_path):
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r")],
               [_vi("x", [1 << 30, 1 << 30, 1 << 20])], [_vi("y", [1])])
    _expect(tmp_path, m, r"'x'|limit|elements")


def test_huge_constant_of_shape(tmp_path):
    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 20, 1 << 10], np.int64), "s")
    m = _model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos")], [], [_vi("y", None)], [shape])
    _expect(tmp_path, m, r"limit|elements|cos")


@pytest.mark.parametrize("location", ["../../etc/passwd", "/etc/passwd", "/dev/zero", "sub/../../x.bin"],
                         ids=["dotdot", "absolute", "device", "nested-dotdot"])
def test_external_data_escaping_the_folder(tmp_path, location):
    t = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    t.ClearField("raw_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        e = t.external_data.add()
        e.key, e.value = k, v
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    m = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [_vi("x", [4])], [_vi("y", [4])], [t])
    p = model_dir / "m.onnx"
    p.write_bytes(m.SerializeToString())
    with pytest.raises(ob.OpbridgeError, match=r"'w'|outside|escape|external"):
        ob.convert(p)


def test_duplicate_value_names(tmp_path):
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r1"),
                helper.make_node("Relu", ["x"], ["y"], name="r2")], [_vi("x", [2])], [_vi("y", [2])])
    _expect(tmp_path, m, r"'y'")


def test_caffemodel_blob_shape_disagrees_with_prototxt(tmp_path):
    proto, model = seeds.write_caffe(tmp_path)
    other = tmp_path / "other.prototxt"
    other.write_bytes(seeds.PROTOTXT.replace(b"num_output: 4", b"num_output: 6"))
    with pytest.raises(ob.OpbridgeError, match=r"conv1"):
        ob.convert(other, weights=model)


def test_cli_one_line_error_exit_2(tmp_path):
    p = tmp_path / "junk.onnx"
    p.write_bytes(b"\x08\x07junk")
    r = subprocess.run([sys.executable, "-m", "opbridge", "convert", str(p), "-o", str(tmp_path / "o.obir")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error: ")


def test_constant_of_shape_empty_but_absurd(tmp_path):
    shape = numpy_helper.from_array(np.array([0, 1 << 62], np.int64), "s")
    m = _model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos")], [], [_vi("y", None)], [shape])
    _expect(tmp_path, m, r"cos.*limit")
