"""Weights are memory-mapped, not copied: ONNX initializers read in place from the .onnx file
(and its external data), streamed into the .obir, and mapped again when the .obir is loaded.
References: onnx.numpy_helper for the ONNX side, the safetensors package for the file."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.errors import ModelFormatError
from opbridge.ir import tensorfile
from opbridge.parsers.onnx import parse_file

DTYPES = [np.float32, np.float16, np.float64, np.int64, np.int32, np.int8, np.uint8, np.uint16, np.bool_]


def _model(tmp_path, *, external: bool = False, raw: bool = True) -> tuple[str, dict[str, np.ndarray]]:
    """A model whose output adds, for each dtype, Cast(initializer) to a running f32 sum; the
    initializers are also graph outputs through Identity, so every one stays in the graph."""
    rng = np.random.default_rng(0)
    inits, nodes, outs = [], [], []
    arrays = {}
    for i, dt in enumerate(DTYPES):
        arr = (rng.standard_normal((3, 5 + i)) * 50).astype(dt)
        name = f"w{i}_{np.dtype(dt).name}"
        arrays[name] = arr
        t = numpy_helper.from_array(arr, name)
        if not raw and dt == np.float32:
            t = helper.make_tensor(name, TensorProto.FLOAT, arr.shape, arr.ravel().tolist())
        inits.append(t)
        nodes.append(helper.make_node("Identity", [name], [f"out{i}"], name=f"id{i}"))
        outs.append(helper.make_tensor_value_info(f"out{i}", helper.np_dtype_to_tensor_dtype(arr.dtype),
                                                  list(arr.shape)))
    nodes.append(helper.make_node("Relu", ["x"], ["y"], name="relu"))
    g = helper.make_graph(nodes, "weights", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]), *outs], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = str(tmp_path / "w.onnx")
    if external:
        onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
                  size_threshold=0)
    else:
        onnx.save(m, path)
    return path, arrays


def _file_backed(arr: np.ndarray) -> bool:
    """The array is a view whose memory belongs to a memory map of a file, not to itself."""
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    return not arr.flags.owndata and isinstance(root, np.memmap)


@pytest.mark.parametrize("external", [False, True], ids=["inline", "external-data"])
def test_onnx_initializers_are_mapped_in_place_and_exact(tmp_path, external: bool) -> None:
    path, arrays = _model(tmp_path, external=external)
    origin = parse_file(path)
    ref = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    for name in arrays:
        got = origin.tensors[name]
        assert got.dtype == ref[name].dtype and np.array_equal(got, ref[name]), name
        assert _file_backed(got), name


def test_initializers_without_raw_data_are_still_read(tmp_path) -> None:
    path, arrays = _model(tmp_path, raw=False)
    origin = parse_file(path)
    name = "w0_float32"
    assert np.array_equal(origin.tensors[name], arrays[name])
    assert _file_backed(origin.tensors["w1_float16"])


@pytest.mark.parametrize("external", [False, True], ids=["inline", "external-data"])
def test_obir_round_trip_keeps_weights_and_maps_them_on_load(tmp_path, external: bool) -> None:
    from safetensors import safe_open

    path, arrays = _model(tmp_path, external=external)
    g = ob.convert(path, passes=())  # no folding: every initializer stays a constant of its own
    out = tmp_path / "w.obir"
    ob.save(g, out)
    g2 = ob.load(out)
    with safe_open(str(out), framework="numpy") as f:  # any safetensors reader reads the file
        stored = {k: f.get_tensor(k) for k in f.keys()}
    for name, arr in arrays.items():
        loaded = g2.constants[name].data
        assert loaded.dtype == arr.dtype and np.array_equal(loaded, arr), name
        assert np.array_equal(stored[name], arr), name
        assert _file_backed(loaded), name
    feeds = {"x": np.array([-1.0, 2.0], np.float32)}
    assert np.array_equal(ob.interpret(g2, feeds)["y"], [0.0, 2.0])


def test_stream_writer_matches_the_safetensors_reader_for_every_layout(tmp_path) -> None:
    from safetensors.numpy import load_file

    src = np.memmap(tmp_path / "src.bin", dtype=np.float32, mode="w+", shape=(64,))
    src[:] = np.arange(64, dtype=np.float32)
    src.flush()
    mapped = np.memmap(tmp_path / "src.bin", dtype=np.float32, mode="r", offset=12, shape=(10,))
    tensors = {
        "mapped": mapped,                                   # copied file to file
        "mapped_slice": mapped[2:8].reshape(2, 3),          # a view inside the map
        "strided": np.arange(20, dtype=np.int64)[::3],      # not contiguous: written from memory
        "scalar": np.array(7, np.int8),
        "empty": np.zeros((0, 4), np.float16),
        "flags": np.array([True, False, True]),
    }
    assert tensorfile.file_region(tensors["mapped_slice"]) == (str(tmp_path / "src.bin"), 12 + 8)
    assert tensorfile.file_region(tensors["strided"]) is None
    out = tmp_path / "t.safetensors"
    tensorfile.write(out, tensors, {"k": "v"})
    back = load_file(str(out))
    for k, v in tensors.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape and np.array_equal(back[k], v), k
    meta, get = tensorfile.read(out)
    assert meta == {"k": "v"}
    assert all(np.array_equal(get(k), v) for k, v in tensors.items())


@pytest.mark.parametrize("damage", ["truncated", "header", "offsets"])
def test_a_damaged_obir_is_a_model_format_error(tmp_path, damage: str) -> None:
    path, _ = _model(tmp_path)
    out = tmp_path / "w.obir"
    ob.save(ob.convert(path), out)
    data = bytearray(out.read_bytes())
    if damage == "truncated":
        data = data[: len(data) - 16]
    elif damage == "header":
        data[10:14] = b"\xff\xfe\x00{"
    else:
        data[:8] = (int.from_bytes(data[:8], "little") + 10**9).to_bytes(8, "little")
    out.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match="w.obir"):
        ob.load(out)
