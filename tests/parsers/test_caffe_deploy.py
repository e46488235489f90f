"""Caffe nets as published rather than as deploy files: data layers as inputs, training-only
layers dropped with a note, repeated layer names, Python layers; checked against OpenCV's
Caffe importer (which renames repeated names the same way) and against the prototxt text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from opbridge.errors import ModelFormatError, ShapeError, UnsupportedOpError
from opbridge.mappers import MappingRegistry
from opbridge.mappers.listing import mapped_ops
from opbridge.parsers.caffe import parse_caffe
from opbridge.tools.caffe_weights import write_random_weights
from tests.conftest import requires_cv2

BODY = '''layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "fc" type: "InnerProduct" bottom: "conv1" top: "fc" inner_product_param { num_output: 5 } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
'''

TRAINING = '''layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
layer { name: "acc" type: "Accuracy" bottom: "fc" bottom: "label" top: "acc" include { phase: TEST } }
layer { name: "l2" type: "EuclideanLoss" bottom: "fc" bottom: "label" top: "l2" loss_weight: 0.1 }
layer { name: "sil" type: "Silence" bottom: "acc2" }
'''


def write(tmp_path: Path, text: str, name: str = "net.prototxt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


DATA_LAYERS = {
    "Input": ('layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 7 dim: 7 } } }',
              None),
    "DummyData,shape": ('layer { name: "in" type: "DummyData" top: "data" top: "label" '
                        'dummy_data_param { shape { dim: 2 dim: 3 dim: 7 dim: 7 } shape { dim: 2 } } }', None),
    "DummyData,legacy num/channels/height/width": (
        'layer { name: "in" type: "DummyData" top: "data" top: "label" dummy_data_param { '
        'num: 2 channels: 3 channels: 1 height: 7 height: 1 width: 7 width: 1 } }', None),
    "MemoryData": ('layer { name: "in" type: "MemoryData" top: "data" top: "label" memory_data_param { '
                   'batch_size: 2 channels: 3 height: 7 width: 7 } }', None),
    "ImageData,new_height/new_width": (
        'layer { name: "in" type: "ImageData" top: "data" top: "label" image_data_param { '
        'source: "list.txt" batch_size: 2 new_height: 7 new_width: 7 } }', None),
    "ImageData,crop_size": (
        'layer { name: "in" type: "ImageData" top: "data" top: "label" transform_param { crop_size: 7 } '
        'image_data_param { source: "list.txt" batch_size: 2 new_height: 9 new_width: 11 } }', None),
    "HDF5Data,shape given": ('layer { name: "in" type: "HDF5Data" top: "data" top: "label" '
                             'hdf5_data_param { source: "train.txt" batch_size: 2 } }', (2, 3, 7, 7)),
    "Data,shape given": ('layer { name: "in" type: "Data" top: "data" top: "label" include { phase: TRAIN } '
                         'data_param { source: "lmdb" batch_size: 64 } }\n'
                         'layer { name: "in" type: "Data" top: "data" top: "label" include { phase: TEST } '
                         'transform_param { crop_size: 7 } data_param { source: "lmdb" batch_size: 2 } }',
                         (2, 3, 7, 7)),
}


@requires_cv2
@pytest.mark.parametrize(("data", "given"), list(DATA_LAYERS.values()), ids=list(DATA_LAYERS))
def test_train_net_converts_like_its_deploy_net(tmp_path: Path, data: str, given: tuple | None) -> None:
    """A train/val net (data layer with a label, losses, accuracy, Silence) converts to the
    graph of its deploy form, whose result OpenCV gives."""
    import cv2

    deploy = write(tmp_path, 'input: "data" input_shape { dim: 2 dim: 3 dim: 7 dim: 7 }\n' + BODY, "deploy.prototxt")
    model = tmp_path / "net.caffemodel"
    write_random_weights(deploy, model, seed=4)
    train = write(tmp_path, data + "\n" + BODY + TRAINING.replace('bottom: "acc2"', 'bottom: "prob"'),
                  "train.prototxt")
    shapes = {"data": given} if given else None
    with pytest.warns(UserWarning, match=r"dropped 4 training-only layer\(s\) from the deploy graph: "
                      r"'loss' \(SoftmaxWithLoss\), 'acc' \(Accuracy\), 'l2' \(EuclideanLoss\), 'sil' \(Silence\)"):
        g = convert(train, weights=model, input_shapes=shapes)
    assert [(v.name, v.shape) for v in g.inputs] == [("data", (2, 3, 7, 7))]
    assert [v.name for v in g.outputs] == ["prob"]
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 7)).astype(np.float32)
    net = cv2.dnn.readNetFromCaffe(str(deploy), str(model))
    net.setInput(x, "data")
    np.testing.assert_allclose(ob.interpret(g, {"data": x})["prob"], net.forward("prob"), rtol=1e-4, atol=1e-6)


def test_data_layer_without_a_shape_asks_for_it_by_name(tmp_path: Path) -> None:
    p = write(tmp_path, DATA_LAYERS["HDF5Data,shape given"][0] + "\n" + BODY + TRAINING.replace("acc2", "prob"))
    with pytest.warns(UserWarning, match="training-only"), \
            pytest.raises(ShapeError, match=r"input 'data' has no declared shape.*\n?.*--input-shape data="):
        convert(p)


def test_dummy_data_legacy_sizes_give_one_shape_per_top(tmp_path: Path) -> None:
    g = parse_caffe(write(tmp_path, DATA_LAYERS["DummyData,legacy num/channels/height/width"][0] + "\n"
                          + 'layer { name: "e" type: "Eltwise" bottom: "data" bottom: "data" top: "e" }\n'
                          + 'layer { name: "p" type: "Power" bottom: "label" top: "p" }\n'))
    assert [(t.name, t.shape) for t in g.inputs] == [("data", (2, 3, 7, 7)), ("label", (2, 1, 1, 1))]


@pytest.mark.parametrize(("data", "shape"), [
    ('type: "ImageData" image_data_param { source: "l" is_color: false new_height: 5 new_width: 6 }', (1, 1, 5, 6)),
    ('type: "ImageData" image_data_param { source: "l" crop_size: 4 batch_size: 3 }', (3, 3, 4, 4)),
    ('type: "ImageData" image_data_param { source: "l" }', None),
    ('type: "WindowData" window_data_param { source: "w" batch_size: 8 crop_size: 6 }', (8, 3, 6, 6)),
    ('type: "Data" transform_param { crop_size: 6 } data_param { source: "db" batch_size: 8 }', None),
], ids=["ImageData,is_color=false", "ImageData,legacy crop_size", "ImageData,sized by its images",
        "WindowData", "Data (channels unknown)"])
def test_image_data_layers_declare_the_shape_their_params_fix(tmp_path: Path, data: str, shape) -> None:  # noqa: ANN001
    g = parse_caffe(write(tmp_path, f'layer {{ name: "in" {data} top: "data" }}\n'
                          'layer { name: "r" type: "ReLU" bottom: "data" top: "r" }\n'))
    assert [(t.name, t.shape) for t in g.inputs] == [("data", shape)]


def test_only_a_training_net_is_refused(tmp_path: Path) -> None:
    p = write(tmp_path, 'input: "a" input_shape { dim: 1 dim: 2 }\ninput: "b" input_shape { dim: 1 dim: 2 }\n'
              'layer { name: "loss" type: "EuclideanLoss" bottom: "a" bottom: "b" top: "loss" }\n')
    with pytest.warns(UserWarning), pytest.raises(ModelFormatError, match="no layers the deploy graph keeps"):
        parse_caffe(p)


HED = '''name: "hed"
input: "data" input_shape { dim: 1 dim: 3 dim: 16 dim: 16 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 2 kernel_size: 3 pad: 1 } }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "up" type: "Deconvolution" bottom: "pool" top: "up" convolution_param { num_output: 2 kernel_size: 4 stride: 2 bias_term: false } }
layer { name: "crop" type: "Crop" bottom: "up" bottom: "data" top: "s1" crop_param { offset: 1 } }
layer { name: "up2" type: "Deconvolution" bottom: "pool" top: "up2" convolution_param { num_output: 2 kernel_size: 6 stride: 2 bias_term: false } }
layer { name: "crop" type: "Crop" bottom: "up2" bottom: "data" top: "s2" crop_param { offset: 2 } }
layer { name: "crop" type: "Crop" bottom: "up2" bottom: "data" top: "s3" }
layer { name: "fuse" type: "Concat" bottom: "s1" bottom: "s2" bottom: "s3" top: "fuse" }
'''


@requires_cv2
def test_repeated_layer_names_are_renamed_as_opencv_does(tmp_path: Path) -> None:
    """HED's deploy names several Crop layers "crop": the repeats become crop_1, crop_2 (the
    names OpenCV gives them), with a warning, and the net runs as in OpenCV."""
    import cv2

    proto = write(tmp_path, HED)
    model = tmp_path / "hed.caffemodel"
    with pytest.warns(UserWarning, match=r"2 layer\(s\) repeat an earlier layer's name; renamed as "
                      r"OpenCV does: 'crop' -> 'crop_1', 'crop' -> 'crop_2'"):
        write_random_weights(proto, model)
        g = convert(proto, weights=model)
    net = cv2.dnn.readNetFromCaffe(str(proto), str(model))
    with pytest.warns(UserWarning, match="renamed"):
        ours = [n.name for n in parse_caffe(proto).nodes]
    assert ours == ["conv", "pool", "up", "crop", "up2", "crop_1", "crop_2", "fuse"]
    assert {"crop", "crop_1", "crop_2"} <= set(net.getLayerNames())
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    net.setInput(x, "data")
    want = dict(zip(["crop", "crop_1", "crop_2", "fuse"], net.forward(["crop", "crop_1", "crop_2", "fuse"])))
    got = ob.interpret(g, {"data": x}, keep_intermediates=True)
    for ours_name, theirs in (("s1", "crop"), ("s2", "crop_1"), ("s3", "crop_2"), ("fuse", "fuse")):
        np.testing.assert_allclose(got[ours_name], want[theirs], rtol=1e-4, atol=1e-5, err_msg=ours_name)


def test_renamed_layers_with_weights_get_their_own_blobs(tmp_path: Path) -> None:
    """random-weights writes a renamed layer's blobs under its new name; a caffemodel that has
    only the old name's blobs gives them to every layer of that name (OpenCV's rule)."""
    text = ('input: "data" input_shape { dim: 1 dim: 2 dim: 3 dim: 3 }\n'
            'layer { name: "s" type: "Scale" bottom: "data" top: "a" }\n'
            'layer { name: "s" type: "Scale" bottom: "a" top: "b" }\n')
    proto = write(tmp_path, text)
    model = tmp_path / "m.caffemodel"
    with pytest.warns(UserWarning, match="renamed"):
        shapes = write_random_weights(proto, model)
        assert shapes == {"s": [(2,)], "s_1": [(2,)]}
        g = parse_caffe(proto, weights=model)
    s, s1 = g.nodes
    assert (s.name, s1.name) == ("s", "s_1")
    assert not np.array_equal(g.tensors[s.weights[0]], g.tensors[s1.weights[0]])
    from opbridge.parsers.caffe_weights import write_caffemodel

    only_old = tmp_path / "old.caffemodel"
    write_caffemodel(only_old, "n", [("s", "Scale", [np.array([2.0, 3.0], np.float32)])])
    with pytest.warns(UserWarning, match="renamed"):
        g2 = convert(proto, weights=only_old)
    x = np.ones((1, 2, 3, 3), np.float32)
    np.testing.assert_allclose(ob.interpret(g2, {"data": x})["b"][0, :, 0, 0], [4.0, 9.0])


PY = '''input: "data" input_shape { dim: 1 dim: 2 dim: 3 dim: 3 }
layer { name: "rpn" type: "Python" bottom: "data" top: "rois"
  python_param { module: "rpn.proposal_layer" layer: "ProposalLayer" param_str: "'feat_stride': 16" } }
layer { name: "odd" type: "FancyFork" bottom: "rois" top: "odd" }
layer { name: "odd2" type: "FancyFork" bottom: "odd" top: "odd2" }
layer { name: "other" type: "Python" bottom: "odd2" top: "y" python_param { module: "m" layer: "L" } }
'''


def _builtin_registry() -> MappingRegistry:
    """The built-in Caffe mappings alone (a plugin another test loaded may map Python layers)."""
    from opbridge.mappers.registry import DEFAULT_MAPPINGS

    reg = MappingRegistry()
    for e in DEFAULT_MAPPINGS.entries("caffe"):
        if "/opbridge/mappers/caffe/" in e.defined_at.replace("\\", "/"):
            reg.register(e.framework, e.key_text, e.fn, since_opset=e.since, defined_at=e.defined_at)
    return reg


def test_unsupported_report_lists_every_layer_and_the_python_class(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedOpError) as info:
        convert(write(tmp_path, PY), registry=_builtin_registry())
    lines = str(info.value).splitlines()
    assert "3 unsupported op types" in lines[0]
    rpn = [ln for ln in lines if "'rpn'" in ln]
    assert len(rpn) == 1 and "rpn.proposal_layer.ProposalLayer::Python" in rpn[0]
    assert '"rpn.proposal_layer.ProposalLayer::Python"' in rpn[0]  # the line that registers it
    assert any("m.L::Python" in ln and "'other'" in ln for ln in lines)
    assert any("FancyFork" in ln and "'odd', 'odd2'" in ln for ln in lines)


def test_a_plugin_mapping_for_a_python_class_converts_it(tmp_path: Path) -> None:
    reg = _builtin_registry()
    seen = []

    @ob.mapping(ob.Framework.CAFFE, "rpn.proposal_layer.ProposalLayer::Python", registry=reg)
    def proposal(node, g):  # noqa: ANN001, ANN202
        seen.append((node.get_attr("module"), node.get_attr("layer"), node.get_attr("param_str")))
        return g.op("Relu", [g.input(0)])

    @ob.mapping(ob.Framework.CAFFE, "Python", registry=reg)
    def any_python(node, g):  # noqa: ANN001, ANN202
        return g.op("Neg", [g.input(0)])

    g = convert(write(tmp_path, PY.replace('type: "FancyFork"', 'type: "ReLU"')), registry=reg)
    assert seen == [("rpn.proposal_layer", "ProposalLayer", "'feat_stride': 16")]
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(ob.interpret(g, {"data": x})["y"], -np.maximum(x, 0))


def test_ops_lists_the_layer_types_the_parser_resolves() -> None:
    rows = {r["op_type"]: r for r in mapped_ops("caffe")}
    for t in ("Input", "DummyData", "MemoryData", "HDF5Data", "Data", "Accuracy", "SoftmaxWithLoss",
              "SigmoidCrossEntropyLoss", "HDF5Output"):
        assert rows[t]["handled_by"].startswith("the parser: "), t
        assert "opbridge/parsers/caffe.py" in rows[t]["defined_at"][0].replace("\\", "/")
    assert "handled_by" not in rows["LSTM"]  # a mapped type, not one the parser resolves


REFUSED = '''input: "data" input_shape { dim: 1 dim: 2 dim: 8 dim: 8 }
layer { name: "sto" type: "Pooling" bottom: "data" top: "sto" pooling_param { pool: STOCHASTIC kernel_size: 2 } }
layer { name: "after" type: "ReLU" bottom: "sto" top: "after" }
layer { name: "fork" type: "FancyFork" bottom: "data" top: "fork" }
layer { name: "itp" type: "Interp" bottom: "data" top: "itp" interp_param { pad_beg: 1 height: 4 width: 4 } }
layer { name: "ok" type: "ReLU" bottom: "data" top: "ok" }
'''


def test_refused_cases_of_mapped_layers_are_listed_with_the_unmapped_types(tmp_path: Path) -> None:
    """A layer form a mapping refuses (STOCHASTIC pooling, a padding Interp) is in the same
    report as the unmapped types, not discovered after they are fixed."""
    with pytest.raises(UnsupportedOpError) as info:
        convert(write(tmp_path, REFUSED), registry=_builtin_registry())
    lines = str(info.value).splitlines()
    assert "1 unsupported op type" in lines[0]
    assert any(ln.startswith("  - FancyFork: node(s) 'fork'") for ln in lines)
    assert any(ln.startswith("and 2 unsupported cases of mapped op types") for ln in lines)
    assert any("layer 'sto' (Pooling)" in ln and "STOCHASTIC" in ln for ln in lines)
    assert any("layer 'itp' (Interp)" in ln and "pad_beg" in ln for ln in lines)
    assert any("1 node(s) that read their outputs were not checked" in ln for ln in lines)


def test_a_single_refused_case_keeps_its_own_error(tmp_path: Path) -> None:
    text = REFUSED.replace('type: "FancyFork"', 'type: "ReLU"').replace("pad_beg: 1", "pad_beg: 0")
    with pytest.raises(UnsupportedOpError, match=r"^\[caffe\] layer 'sto' \(Pooling\).*STOCHASTIC"):
        convert(write(tmp_path, text), registry=_builtin_registry())


def test_v1_train_net_drops_its_loss_and_accuracy(tmp_path: Path) -> None:
    """V1 ``layers {}`` with enum types: DATA is an input, SOFTMAX_LOSS and ACCURACY are dropped."""
    p = write(tmp_path, '''name: "v1"
layers { name: "data" type: DATA top: "data" top: "label" data_param { source: "db" batch_size: 4 } }
layers { name: "fc" type: INNER_PRODUCT bottom: "data" top: "fc" inner_product_param { num_output: 3 } }
layers { name: "loss" type: SOFTMAX_LOSS bottom: "fc" bottom: "label" top: "loss" }
layers { name: "acc" type: ACCURACY bottom: "fc" bottom: "label" top: "acc" }
''')
    with pytest.warns(UserWarning, match=r"'loss' \(SoftmaxWithLoss\), 'acc' \(Accuracy\)"):
        g = parse_caffe(p, input_shapes={"data": (4, 5)})
    assert [(t.name, t.shape) for t in g.inputs] == [("data", (4, 5))]
    assert [n.op_type for n in g.nodes] == ["InnerProduct"]
    assert [t.name for t in g.outputs] == ["fc"]
