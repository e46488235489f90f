"""The Caffe parser: prototxt forms (V1, CRLF, inputs, in-place, forks), caffemodels, errors."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from opbridge.errors import ModelFormatError, ShapeError
from opbridge.parsers.caffe import parse_caffe
from opbridge.parsers.caffe_weights import write_caffemodel
from opbridge.proto import caffe_pb2
from opbridge.tools.caffe_weights import write_random_weights

NET = '''name: "n"
input: "data"
input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
'''


def write(tmp_path: Path, text: str, name: str = "net.prototxt", newline: str = "\n") -> Path:
    p = tmp_path / name
    p.write_bytes(text.replace("\n", newline).encode())
    return p


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["LF", "CRLF"])
def test_in_place_layers_become_ssa_keeping_the_final_name(tmp_path: Path, newline: str) -> None:
    g = parse_caffe(write(tmp_path, NET, newline=newline))
    outs = [n.outputs[0] for n in g.nodes]
    assert outs == ["conv1/conv1", "conv1/bn1", "conv1", "pool1"]
    assert [n.inputs[0] for n in g.nodes] == ["data", "conv1/conv1", "conv1/bn1", "conv1"]
    assert [t.name for t in g.outputs] == ["pool1"]
    assert g.nodes[0].attrs == {"num_output": 4, "kernel_size": [3]}
    assert g.nodes[0].location.endswith(":4")


def test_in_place_layer_on_a_graph_input(tmp_path: Path) -> None:
    """The input keeps its name (it is fed by it); the in-place result gets 'data/scale'."""
    text = ('input: "data" input_shape { dim: 1 dim: 2 }\n'
            'layer { name: "scale" type: "Power" bottom: "data" top: "data" power_param { scale: 2 } }\n'
            'layer { name: "out" type: "ReLU" bottom: "data" top: "out" }\n')
    g = parse_caffe(write(tmp_path, text))
    assert [t.name for t in g.inputs] == ["data"]
    assert g.nodes[0].outputs == ["data/scale"] and g.nodes[1].inputs == ["data/scale"]
    x = np.array([[-1.0, 3.0]], np.float32)
    np.testing.assert_allclose(ob.interpret(convert(g), {"data": x})["out"], [[0.0, 6.0]])


def test_v1_layers_with_enum_types_and_input_dim(tmp_path: Path) -> None:
    text = '''name: "old"
input: "data"
input_dim: 2 input_dim: 3 input_dim: 5 input_dim: 5
layers { name: "c" type: CONVOLUTION bottom: "data" top: "c" convolution_param { num_output: 2 kernel_size: 1 } }
layers { name: "r" type: RELU bottom: "c" top: "c" }
layers { name: "ip" type: INNER_PRODUCT bottom: "c" top: "ip" inner_product_param { num_output: 3 } }
layers { name: "p" type: SOFTMAX bottom: "ip" top: "p" }
'''
    g = parse_caffe(write(tmp_path, text))
    assert [n.op_type for n in g.nodes] == ["Convolution", "ReLU", "InnerProduct", "Softmax"]
    assert g.inputs[0].shape == (2, 3, 5, 5)


def test_input_layer_and_override_of_the_batch(tmp_path: Path) -> None:
    text = '''layer { name: "in" type: "Input" top: "data" top: "aux"
  input_param { shape { dim: 10 dim: 3 dim: 4 dim: 4 } } }
layer { name: "e" type: "Eltwise" bottom: "data" bottom: "aux" top: "e" }
'''
    p = write(tmp_path, text)
    g = parse_caffe(p)
    assert [(t.name, t.shape) for t in g.inputs] == [("data", (10, 3, 4, 4)), ("aux", (10, 3, 4, 4))]
    g1 = parse_caffe(p, input_shapes={"data": (1, 3, 4, 4), "aux": (1, 3, 4, 4)})
    assert g1.inputs[0].shape == (1, 3, 4, 4)
    with pytest.raises(ShapeError, match="'nope'.*not an input"):
        parse_caffe(p, input_shapes={"nope": (1,)})
    with pytest.raises(ShapeError, match="'data' is declared with 4 dims"):
        parse_caffe(p, input_shapes={"data": (1, 3, 4)})
    with pytest.raises(ShapeError, match="dims must be >= 1"):
        parse_caffe(p, input_shapes={"data": (0, 3, 4, 4)})


def test_data_layer_needs_a_shape(tmp_path: Path) -> None:
    text = '''layer { name: "d" type: "Data" top: "data" top: "label" data_param { source: "x" batch_size: 4 } }
layer { name: "r" type: "ReLU" bottom: "data" top: "r" }
'''
    p = write(tmp_path, text)
    with pytest.raises(ShapeError, match="data"):
        convert(p)
    g = parse_caffe(p, input_shapes={"data": (4, 3, 2, 2)})
    graph = convert(g)
    assert graph.inputs[0].shape == (4, 3, 2, 2)


def test_split_silence_and_phase_rules(tmp_path: Path) -> None:
    text = NET + '''layer { name: "sp" type: "Split" bottom: "pool1" top: "a" top: "b" }
layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "sum" }
layer { name: "sil" type: "Silence" bottom: "sum" }
layer { name: "train_only" type: "ReLU" bottom: "pool1" top: "t" include { phase: TRAIN } }
layer { name: "not_test" type: "ReLU" bottom: "pool1" top: "u" exclude { phase: TEST } }
layer { name: "test_only" type: "ReLU" bottom: "pool1" top: "v" include { phase: TEST } }
'''
    g = parse_caffe(write(tmp_path, text))
    names = [n.name for n in g.nodes]
    assert "sp" not in names and "sil" not in names
    assert "train_only" not in names and "not_test" not in names and "test_only" in names
    assert g.nodes[names.index("sum")].inputs == ["pool1", "pool1"]


def test_unknown_blocks_and_fork_fields_are_generic(tmp_path: Path) -> None:
    text = '''input: "data" input_shape { dim: 1 dim: 1 dim: 2 dim: 2 }
layer { name: "x" type: "MyLayer" bottom: "data" top: "x"
  my_param { a: 1 b: "s" c: 2.5 d { e: true f: -3 } g: 1 g: 2 h: SOME_ENUM } }
layer { name: "p" type: "Pooling" bottom: "x" top: "p" pooling_param { kernel_size: 2 ceil_mode: false } }
'''
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # custom blocks and the handled ceil_mode: no warning
        g = parse_caffe(write(tmp_path, text))
    assert g.nodes[0].attrs == {"a": 1, "b": "s", "c": 2.5, "d": {"e": True, "f": -3}, "g": [1, 2],
                                "h": "SOME_ENUM"}
    assert g.nodes[1].attrs == {"kernel_size": 2, "ceil_mode": False}


def test_unknown_field_in_a_known_block_warns(tmp_path: Path) -> None:
    """A typo (or a fork field no mapping reads) inside a BVLC block is not dropped silently."""
    text = ('input: "data" input_shape { dim: 1 dim: 1 dim: 4 dim: 4 }\n'
            'layer { name: "c" type: "Convolution" bottom: "data" top: "c"\n'
            '  convolution_param { num_output: 1 kernal_size: 3 kernel_size: 1 } }\n')
    with pytest.warns(UserWarning, match=r"ConvolutionParameter\.kernal_size \(layer 'c'\)"):
        g = parse_caffe(write(tmp_path, text))
    assert g.nodes[0].attrs["kernal_size"] == 3


@pytest.mark.parametrize(("text", "match"), [
    ('layer { name: "a" type: "ReLU" bottom: "data" top: "a"', r"net.prototxt:\d+: .*not closed"),
    ('layer { name: "a" type: "ReLU" bottom: "data" top: "a" } }', r"net.prototxt:2: .*expected a field name"),
    ('layer { name: "a" type: "Convolution" bottom: "data" top: "a"\n convolution_param { num_output: "x" } }',
     r"net.prototxt:2: layer 'a'.*num_output.*line 3"),
    ('layer { name: "a" type: "Pooling" bottom: "data" top: "a" pooling_param { pool: AVERAGE } }',
     r"layer 'a'.*pool.*'AVERAGE'(.|\n)*MAX, AVE"),
    ('layer { name: "a" type: "ReLU" type: "TanH" bottom: "data" top: "a" }', r"'type' given twice"),
    ('layer { name: "a" type: "ReLU" bottom: "nothing" top: "a" }', r"layer 'a' \(ReLU\): bottom 'nothing'"),
    ('layer { name: "a" bottom: "data" top: "a" }', r"layer 'a'.*no 'type'"),
    ('layer { name: "l" type: "SoftmaxWithLoss" bottom: "data" bottom: "data" top: "loss" }\n'
     'layer { name: "r" type: "ReLU" bottom: "loss" top: "r" }',
     r":3: layer 'r' \(ReLU\): bottom 'loss' is the output of 'l' \(SoftmaxWithLoss\), a training-only"),
], ids=["unclosed", "extra brace", "string for int", "bad enum", "duplicate field", "unknown bottom",
        "no type", "reads a dropped loss"])
def test_malformed_prototxt_names_line_or_layer(tmp_path: Path, text: str, match: str) -> None:
    p = write(tmp_path, 'input: "data" input_shape { dim: 1 dim: 1 dim: 2 dim: 2 }\n' + text)
    with pytest.raises(ModelFormatError, match=match):
        parse_caffe(p)


def test_binary_given_as_prototxt(tmp_path: Path) -> None:
    p = tmp_path / "x.prototxt"
    p.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ModelFormatError, match="not UTF-8"):
        parse_caffe(p)


# -- caffemodel ---------------------------------------------------------------------------------

def test_weights_round_trip_and_match_by_name(tmp_path: Path) -> None:
    p = write(tmp_path, NET)
    w = tmp_path / "w.caffemodel"
    shapes = write_random_weights(p, w, seed=1)
    assert shapes == {"conv1": [(4, 3, 3, 3), (4,)], "bn1": [(4,), (4,), (1,)]}
    net = caffe_pb2.NetParameter()
    net.ParseFromString(w.read_bytes())
    assert [(layer.name, len(layer.blobs)) for layer in net.layer if layer.blobs] == [("conv1", 2), ("bn1", 3)]
    g = parse_caffe(p, weights=w)
    # every layer is in the file, as Caffe writes it (a net of blob-less layers still loads)
    assert [layer.name for layer in net.layer] == [n.name for n in g.nodes]
    assert g.nodes[1].weights == ["bn1/blob0", "bn1/blob1", "bn1/blob2"]
    var, factor = g.tensors["bn1/blob1"], g.tensors["bn1/blob2"]
    assert (var > 0).all() and factor[0] > 1


def test_random_weights_are_seeded(tmp_path: Path) -> None:
    p = write(tmp_path, NET)
    write_random_weights(p, tmp_path / "a.caffemodel", seed=4)
    write_random_weights(p, tmp_path / "b.caffemodel", seed=4)
    write_random_weights(p, tmp_path / "c.caffemodel", seed=5)
    a, b, c = ((tmp_path / f"{n}.caffemodel").read_bytes() for n in "abc")
    assert a == b and a != c


def test_missing_weight_names_layer_and_shape(tmp_path: Path) -> None:
    p = write(tmp_path, NET)
    w = tmp_path / "w.caffemodel"
    write_caffemodel(w, "n", [("conv1", "Convolution", [np.zeros((4, 3, 3, 3), np.float32)])])
    with pytest.raises(ob.OpbridgeError, match=r"layer 'conv1' \(Convolution\).*no blob 1 of shape \(4,\)"):
        convert(parse_caffe(p, weights=w))


def test_shape_mismatch_names_both_shapes(tmp_path: Path) -> None:
    p = write(tmp_path, NET)
    w = tmp_path / "w.caffemodel"
    write_caffemodel(w, "n", [("conv1", "Convolution", [np.zeros((4, 3, 5, 5), np.float32),
                                                         np.zeros(4, np.float32)])])
    with pytest.raises(ShapeError, match=r"layer 'conv1'.*\(4, 3, 5, 5\).*\(4, 3, 3, 3\)"):
        convert(parse_caffe(p, weights=w))


def test_weights_for_unknown_layers_warn(tmp_path: Path) -> None:
    p = write(tmp_path, NET)
    w = tmp_path / "w.caffemodel"
    write_random_weights(p, w, seed=0)
    extra = caffe_pb2.NetParameter()
    extra.ParseFromString(w.read_bytes())
    ghost = extra.layer.add(name="ghost", type="Convolution")
    ghost.blobs.add().data.extend([1.0])
    ghost.blobs[0].shape.dim.append(1)
    w.write_bytes(extra.SerializeToString())
    with pytest.warns(UserWarning, match="ghost"):
        parse_caffe(p, weights=w)


def test_legacy_v1_caffemodel_with_4d_blob_dims(tmp_path: Path) -> None:
    """An old caffemodel: V1 layers, blobs with num/channels/height/width (IP weight 1x1xNxK)."""
    text = '''input: "data" input_dim: 2 input_dim: 3 input_dim: 1 input_dim: 1
layers { name: "ip" type: INNER_PRODUCT bottom: "data" top: "ip" inner_product_param { num_output: 2 } }
'''
    p = write(tmp_path, text)
    net = caffe_pb2.NetParameter()
    layer = net.layers.add(name="ip", type=caffe_pb2.V1LayerParameter.INNER_PRODUCT)
    wb = layer.blobs.add(num=1, channels=1, height=2, width=3)
    wb.data.extend([1, 2, 3, 4, 5, 6])
    bb = layer.blobs.add(num=1, channels=1, height=1, width=2)
    bb.data.extend([0.5, -0.5])
    w = tmp_path / "w.caffemodel"
    w.write_bytes(net.SerializeToString())
    x = np.arange(6, dtype=np.float32).reshape(2, 3, 1, 1)
    got = ob.interpret(convert(parse_caffe(p, weights=w)), {"data": x})["ip"]
    want = x.reshape(2, 3) @ np.array([[1, 2, 3], [4, 5, 6]], np.float32).T + [0.5, -0.5]
    np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("damage", ["truncated", "text", "empty"])
def test_malformed_caffemodel(tmp_path: Path, damage: str) -> None:
    p = write(tmp_path, NET)
    w = tmp_path / "w.caffemodel"
    write_random_weights(p, w, seed=0)
    data = w.read_bytes()
    w.write_bytes({"truncated": data[: len(data) // 2], "text": NET.encode(), "empty": b""}[damage])
    with pytest.raises(ModelFormatError, match="caffemodel 'w.caffemodel'"):
        parse_caffe(p, weights=w)


def test_random_weights_cli_file_loads_in_opencv(tmp_path: Path) -> None:
    cv2 = pytest.importorskip("cv2", reason="opencv-python-headless<5 is not installed")
    from opbridge.cli import main

    p = write(tmp_path, NET)
    out = tmp_path / "net.caffemodel"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["random-weights", str(p), "-o", str(out), "--seed", "3"]) == 0
    net = cv2.dnn.readNetFromCaffe(str(p), str(out))
    net.setInput(np.ones((1, 3, 8, 8), np.float32))
    assert np.isfinite(net.forward()).all()


def test_random_weights_cli_needs_data_shapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from opbridge.cli import main

    p = write(tmp_path, 'layer { name: "d" type: "Data" top: "data" }\n'
                        'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
                        'convolution_param { num_output: 2 kernel_size: 1 } }\n')
    assert main(["random-weights", str(p), "-o", str(tmp_path / "o.caffemodel")]) == 2
    assert "--input-shape data=" in capsys.readouterr().err
    assert main(["random-weights", str(p), "-o", str(tmp_path / "o.caffemodel"),
                 "--input-shape", "data=1,3,4,4"]) == 0
