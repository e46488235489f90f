"""The ONNX parser: initializers, Constant nodes, opsets, value_info, external data, bad files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.errors import ModelFormatError
from opbridge.parsers.onnx import parse_file, parse_model


def _model(nodes, inputs, outputs, inits=(), opsets=(("", 17),), value_info=(), functions=()):
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits), value_info=list(value_info))
    return helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                             functions=list(functions))


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


W = np.arange(12, dtype=np.float32).reshape(3, 4)


def _identity_model(**kw):
    return _model([helper.make_node("Identity", ["w"], ["y"], name="id")], [_vi("w", [3, 4])],
                  [_vi("y", [3, 4])], inits=[numpy_helper.from_array(W, "w")], **kw)


def test_initializer_is_a_view_of_raw_data_not_a_copy():
    origin = parse_model(_identity_model())
    arr = origin.tensors["w"]
    np.testing.assert_array_equal(arr, W)
    assert not arr.flags.owndata  # a view of the protobuf's bytes


def test_graph_input_that_is_an_initializer_is_a_constant():
    origin = parse_model(_identity_model())
    assert [t.name for t in origin.inputs] == []
    g = ob.convert(_identity_model())
    assert g.inputs == [] and "w" not in {v.name for v in g.inputs}


def test_constant_node_and_opsets_per_domain():
    c = helper.make_node("Constant", [], ["c"], name="k", value=numpy_helper.from_array(W))
    n = helper.make_node("Identity", ["c"], ["y"], name="id")
    m = _model([c, n], [], [_vi("y", [3, 4])], opsets=(("ai.onnx", 13), ("com.example", 2)))
    origin = parse_model(m)
    assert origin.opsets == {"": 13, "com.example": 2}
    np.testing.assert_array_equal(origin.nodes[0].attrs["value"], W)
    g = ob.convert(m, passes=())
    np.testing.assert_array_equal(ob.interpret(g, {})["y"], W)


def test_value_info_and_symbolic_dims():
    m = _model([helper.make_node("Identity", ["x"], ["t"]), helper.make_node("Identity", ["t"], ["y"])],
               [_vi("x", ["batch", None, 4])], [_vi("y", None)], value_info=[_vi("t", ["batch", 3, 4])])
    origin = parse_model(m)
    assert origin.inputs[0].shape == ("batch", "x_dim1", 4)
    assert origin.value_info["t"].shape == ("batch", 3, 4)
    assert [n.name for n in origin.nodes] == ["Identity_0", "Identity_1"]  # unnamed nodes get names


def test_model_local_function_is_inlined():
    fn = helper.make_function("com.local", "Twice", ["a"], ["b"],
                              [helper.make_node("Add", ["a", "a"], ["b"])],
                              opset_imports=[helper.make_opsetid("", 17)])
    m = _model([helper.make_node("Twice", ["x"], ["y"], domain="com.local", name="t")], [_vi("x", [2])],
               [_vi("y", [2])], opsets=(("", 17), ("com.local", 1)), functions=[fn])
    origin = parse_model(m)
    assert [n.op_type for n in origin.nodes] == ["Add"]


def _save_external(tmp_path: Path) -> Path:
    path = tmp_path / "model.onnx"
    onnx.save(_identity_model(), str(path), save_as_external_data=True, location="weights.bin",
              size_threshold=0)
    return path


def test_external_data_is_memory_mapped(tmp_path):
    path = _save_external(tmp_path)
    origin = parse_file(path)
    arr = origin.tensors["w"]
    assert isinstance(arr, np.memmap)
    np.testing.assert_array_equal(arr, W)
    g = ob.convert(path)
    np.testing.assert_array_equal(ob.interpret(g, {})["y"], W)


def _set_location(path: Path, location: str) -> None:
    m = onnx.load(str(path), load_external_data=False)
    for e in m.graph.initializer[0].external_data:
        if e.key == "location":
            e.value = location
    onnx.save(m, str(path))


@pytest.mark.parametrize("location,match", [
    ("../weights.bin", r"escapes the model's folder"),
    ("sub/../../weights.bin", r"escapes the model's folder"),
    ("/etc/passwd", r"absolute paths are refused"),
    ("/dev/zero", r"absolute paths are refused"),
    ("missing.bin", r"cannot be read"),
    ("", r"empty or invalid path"),
], ids=["parent", "parent-nested", "absolute", "device-absolute", "missing", "empty"])
def test_external_data_location_refused(tmp_path, location, match):
    folder = tmp_path / "model_dir"
    folder.mkdir()
    path = _save_external(folder)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 48)
    _set_location(path, location)
    with pytest.raises(ModelFormatError, match=r"initializer 'w' external data location .*" + match):
        parse_file(path).tensors["w"]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_external_data_symlink_to_device_refused(tmp_path):
    path = _save_external(tmp_path)
    (tmp_path / "dev.bin").symlink_to("/dev/zero")
    _set_location(path, "dev.bin")
    with pytest.raises(ModelFormatError, match=r"escapes the model's folder|not a regular file"):
        parse_file(path).tensors["w"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_external_data_fifo_refused(tmp_path):
    path = _save_external(tmp_path)
    os.mkfifo(tmp_path / "pipe.bin")
    _set_location(path, "pipe.bin")
    with pytest.raises(ModelFormatError, match=r"not a regular file"):
        parse_file(path).tensors["w"]


def test_external_data_truncated(tmp_path):
    path = _save_external(tmp_path)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 10)
    with pytest.raises(ModelFormatError, match=r"external data needs bytes 0\.\.48 of 'weights.bin', which has 10"):
        parse_file(path).tensors["w"]


def test_in_memory_model_with_external_data_needs_a_path(tmp_path):
    path = _save_external(tmp_path)
    m = onnx.load(str(path), load_external_data=False)
    with pytest.raises(ModelFormatError, match=r"not loaded from a file"):
        parse_model(m).tensors["w"]


@pytest.mark.parametrize("content", [b"", b"\x08\x07garbage\xff\xff", b"not a model at all"],
                         ids=["empty", "truncated", "text"])
def test_malformed_file(tmp_path, content):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(ModelFormatError, match=r"bad\.onnx"):
        parse_file(path)


def test_weights_argument_is_refused_for_onnx(tmp_path):
    with pytest.raises(ModelFormatError, match=r"--weights is for Caffe"):
        parse_file(tmp_path / "m.onnx", weights="w.caffemodel")


def test_model_file_above_2gb_is_refused_with_a_hint(tmp_path):
    path = tmp_path / "huge.onnx"
    with open(path, "wb") as f:
        f.truncate(2**31 + 16)  # sparse: no disk or memory is used
    with pytest.raises(ModelFormatError, match=r"above the 2 GB protobuf limit(?s:.*)save_as_external_data"):
        parse_file(path)


def test_external_tensor_above_2gb_is_memory_mapped(tmp_path):
    """A > 2 GB model keeps its weights outside the protobuf; they are mapped, not read."""
    n = 2**29 + 2  # float32: 2 GiB + 8 bytes
    big = TensorProto()
    big.name, big.data_type = "big", TensorProto.FLOAT
    big.dims.append(n)
    big.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "big.bin"), ("offset", "0"), ("length", str(4 * n))):
        e = big.external_data.add()
        e.key, e.value = k, v
    with open(tmp_path / "big.bin", "wb") as f:
        f.truncate(4 * n)  # sparse file
    g = helper.make_graph([helper.make_node("Identity", ["big"], ["y"])], "big", [], [_vi("y", [n])],
                          initializer=[big])
    path = tmp_path / "big.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    arr = parse_file(path).tensors["big"]
    assert isinstance(arr, np.memmap) and arr.shape == (n,) and arr.nbytes > 2**31
    assert arr[0] == 0 and arr[-1] == 0


def test_initializer_that_is_a_graph_output():
    m = _model([helper.make_node("Identity", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2]), _vi("w", [3, 4])],
               inits=[numpy_helper.from_array(W, "w")])
    g = ob.convert(m)
    out = ob.interpret(g, {"x": np.ones(2, np.float32)})
    np.testing.assert_array_equal(out["w"], W)
