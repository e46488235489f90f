"""Random Caffe weights through the mappings (``opbridge random-weights``): blob shapes come
from what each mapping reads, so a plugin's layers take part; values keep nets sane; the file
loads in OpenCV's cv2.dnn (an independent Caffe reader), which computes the same outputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from opbridge.errors import ShapeError
from opbridge.mappers import Framework, MappingError, MappingRegistry
from opbridge.mappers.weights import WEIGHT_KINDS
from opbridge.parsers.caffe import parse_caffe
from opbridge.parsers.caffe_weights import read_caffemodel, write_caffemodel
from opbridge.tools.caffe_weights import BATCHNORM_COUNT, SAMPLERS, write_random_weights
from tests.conftest import requires_cv2
from tests.mappers.caffe.caffe_ref import layer, tiny_net

PLUGIN = Path(__file__).with_name("weights_plugin.py")

#: data -> a plugin layer whose output shape only its op's shape function knows -> Convolution
#: -> a plugin layer with its own blob.
PLUGIN_NET = tiny_net(
    layer("DoubleUp", name="up")
    + layer("Convolution", "convolution_param { num_output: 4 kernel_size: 3 }", name="conv",
            bottoms=("up",))
    + layer("ChannelGain", name="gain", bottoms=("conv",)),
    shape=(1, 3, 5, 5),
)


def _cli(*args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "opbridge", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def _write(tmp_path: Path, text: str, name: str = "net.prototxt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_plugin_layer_feeding_a_convolution_on_the_cli(tmp_path: Path) -> None:
    proto = _write(tmp_path, PLUGIN_NET)
    out = tmp_path / "net.caffemodel"
    r = _cli("random-weights", proto, "--plugin", PLUGIN, "-o", out, "--seed", 5)
    assert r.returncode == 0, r.stderr
    blobs = read_caffemodel(out)
    assert [a.shape for a in blobs["conv"]] == [(4, 3, 3, 3), (4,)]
    assert [a.shape for a in blobs["gain"]] == [(4, 1, 1)]
    assert blobs["up"] == []


def test_plugin_layer_without_its_plugin_exits_2(tmp_path: Path) -> None:
    proto = _write(tmp_path, PLUGIN_NET)
    r = _cli("random-weights", proto, "-o", tmp_path / "net.caffemodel")
    assert r.returncode == 2, r.stderr
    assert "DoubleUp" in r.stderr and "'up'" in r.stderr and "Traceback" not in r.stderr


class _DoubleUp:
    """OpenCV custom layer: nearest upsampling by repetition."""

    def __init__(self, params: Any, blobs: Any) -> None:
        pass

    def getMemoryShapes(self, inputs: Any) -> Any:  # noqa: N802 - OpenCV's name
        n, c, h, w = inputs[0]
        return [[n, c, h * 2, w * 2]]

    def forward(self, inputs: Any) -> Any:
        return [np.repeat(np.repeat(inputs[0], 2, axis=2), 2, axis=3)]


class _ChannelGain:
    """OpenCV custom layer: x times its blob 0, as OpenCV hands the blob over."""

    def __init__(self, params: Any, blobs: Any) -> None:
        self.gain = np.asarray(blobs[0]).reshape(1, -1, 1, 1)

    def getMemoryShapes(self, inputs: Any) -> Any:  # noqa: N802 - OpenCV's name
        return [inputs[0]]

    def forward(self, inputs: Any) -> Any:
        return [inputs[0] * self.gain]


@requires_cv2
def test_plugin_net_weights_load_in_opencv_and_match(tmp_path: Path) -> None:
    import cv2

    proto = _write(tmp_path, PLUGIN_NET)
    weights = tmp_path / "net.caffemodel"
    write_random_weights(proto, weights, seed=2, plugins=[PLUGIN])
    x = np.random.default_rng(0).standard_normal((1, 3, 5, 5)).astype(np.float32)
    ours = ob.interpret(convert(proto, weights=weights, plugins=[PLUGIN]), {"data": x})["gain"]
    cv2.dnn_registerLayer("DoubleUp", _DoubleUp)
    cv2.dnn_registerLayer("ChannelGain", _ChannelGain)
    try:
        net = cv2.dnn.readNetFromCaffe(str(proto), str(weights))
        net.setInput(x)
        ref = net.forward("gain")
    finally:
        cv2.dnn_unregisterLayer("DoubleUp")
        cv2.dnn_unregisterLayer("ChannelGain")
    assert ours.shape == ref.shape == (1, 4, 8, 8)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    proto = _write(tmp_path, PLUGIN_NET)
    for name, seed in (("a", 9), ("b", 9), ("c", 10)):
        write_random_weights(proto, tmp_path / f"{name}.caffemodel", seed=seed, plugins=[PLUGIN])
    a, b, c = ((tmp_path / f"{n}.caffemodel").read_bytes() for n in "abc")
    assert a == b and a != c


def test_negative_seed_is_refused(tmp_path: Path) -> None:
    proto = _write(tmp_path, PLUGIN_NET)
    with pytest.raises(ob.OpbridgeError, match=r"seed = -1: must be >= 0"):
        write_random_weights(proto, tmp_path / "w.caffemodel", seed=-1, plugins=[PLUGIN])


def test_plugin_blob_of_the_wrong_shape_names_the_layer(tmp_path: Path) -> None:
    proto = _write(tmp_path, PLUGIN_NET)
    good = tmp_path / "good.caffemodel"
    write_random_weights(proto, good, seed=0, plugins=[PLUGIN])
    blobs = read_caffemodel(good)
    bad = tmp_path / "bad.caffemodel"
    write_caffemodel(bad, "t", [("conv", "Convolution", blobs["conv"]),
                                ("gain", "ChannelGain", [np.ones(3, np.float32)])])
    with pytest.raises(ShapeError, match=r"layer 'gain' \(ChannelGain\): blob 0.*\(3,\).*\(4, 1, 1\)"):
        convert(proto, weights=bad, plugins=[PLUGIN])


SANE_NET = tiny_net(
    layer("Convolution", "convolution_param { num_output: 64 kernel_size: 3 group: 1 }",
          name="conv")
    + layer("Deconvolution", "convolution_param { num_output: 32 kernel_size: 4 stride: 2 }",
            name="deconv", bottoms=("conv",))
    + layer("BatchNorm", name="bn", bottoms=("deconv",))
    + layer("Scale", "scale_param { bias_term: true }", name="sc", bottoms=("bn",))
    + layer("PReLU", name="prelu", bottoms=("sc",))
    + layer("Normalize", "norm_param { across_spatial: false channel_shared: false }", name="norm", bottoms=("prelu",))
    + layer("InnerProduct", "inner_product_param { num_output: 10 }", name="ip", bottoms=("norm",)),
    shape=(1, 16, 9, 9),
)


def test_blob_values_keep_the_net_numerically_sane(tmp_path: Path) -> None:
    """By kind: fan-in scaled weights, BatchNorm statistics times Caffe's count with a positive
    variance, scales near 1, small PReLU slopes, Normalize's scale near 20."""
    proto = _write(tmp_path, SANE_NET)
    w = tmp_path / "w.caffemodel"
    shapes = write_random_weights(proto, w, seed=0)
    assert shapes == {"conv": [(64, 16, 3, 3), (64,)], "deconv": [(64, 32, 4, 4), (32,)],
                      "bn": [(32,), (32,), (1,)], "sc": [(32,), (32,)], "prelu": [(32,)],
                      "norm": [(32,)], "ip": [(10, 32 * 16 * 16), (10,)]}
    b = read_caffemodel(w)
    for name, fan_in in (("conv", 16 * 9), ("deconv", 64 * 16), ("ip", 32 * 16 * 16)):
        std = float(b[name][0].std())
        assert abs(std * np.sqrt(fan_in) - 1.0) < 0.1, f"{name}: std {std} for fan-in {fan_in}"
    mean, var, count = b["bn"]
    assert count.tolist() == [pytest.approx(BATCHNORM_COUNT)]
    assert (var / count > 0.4).all() and (np.abs(mean / count) < 1.0).all()
    assert ((b["sc"][0] >= 0.5) & (b["sc"][0] <= 1.5)).all()
    assert ((b["prelu"][0] > 0) & (b["prelu"][0] < 0.5)).all()
    assert ((b["norm"][0] >= 5) & (b["norm"][0] <= 20)).all()
    x = np.random.default_rng(1).standard_normal((1, 16, 9, 9)).astype(np.float32)
    y = ob.interpret(convert(proto, weights=w), {"data": x})["ip"]
    assert np.isfinite(y).all() and 1e-3 < float(np.abs(y).max()) < 1e4


def test_every_weight_kind_has_values() -> None:
    assert set(SAMPLERS) == set(WEIGHT_KINDS)


def test_batchnorm_without_global_stats_still_gets_its_blobs(tmp_path: Path) -> None:
    """Caffe (and OpenCV) keep BatchNorm's three blobs even when it normalises with the batch's
    statistics; without weights the layer still converts."""
    proto = _write(tmp_path, tiny_net(layer("BatchNorm", "batch_norm_param { use_global_stats: false }",
                                            name="bn")))
    w = tmp_path / "w.caffemodel"
    assert write_random_weights(proto, w, seed=0) == {"bn": [(3,), (3,), (1,)]}
    convert(proto)
    bad = tmp_path / "bad.caffemodel"
    write_caffemodel(bad, "t", [("bn", "BatchNorm", [np.ones(4, np.float32)] * 2 + [np.ones(1, np.float32)])])
    with pytest.raises(ShapeError, match=r"layer 'bn' \(BatchNorm\): blob 0.*\(4,\).*\(3,\)"):
        convert(proto, weights=bad)


def test_a_mapping_that_skips_a_blob_is_reported(tmp_path: Path) -> None:
    """Blob 0 was never read, so its shape is unknown: an error naming the layer, not a file
    OpenCV would misread."""
    reg = MappingRegistry()

    def second_only(node: ob.OriginNode, g: Any) -> Any:
        return g.op("Add", [g.input(0), g.weight(1, shape=(1,))])

    reg.register(Framework.CAFFE, "Odd", second_only)
    proto = _write(tmp_path, tiny_net(layer("Odd", name="odd")))
    with pytest.raises(MappingError, match=r"layer 'odd' \(Odd\).*read blob\(s\) \[1\] but not blob 0"):
        write_random_weights(proto, tmp_path / "w.caffemodel", registry=reg)


def test_layer_order_and_blobless_layers_as_caffe_writes_them(tmp_path: Path) -> None:
    proto = _write(tmp_path, PLUGIN_NET)
    w = tmp_path / "w.caffemodel"
    write_random_weights(proto, w, seed=0, plugins=[PLUGIN])
    assert list(read_caffemodel(w)) == [n.name for n in parse_caffe(proto).nodes]


EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "plugins"

#: A net per example Caffe plugin: convolutions feed the plugin's layer, and for the proposal
#: layer an InnerProduct reads its (post_nms_top_n, 5) output, sized by the plugin's op.
EXAMPLE_NETS = {
    "frcnn_proposal.py": (
        'input: "data"\ninput_shape { dim: 1 dim: 8 dim: 6 dim: 7 }\n'
        'input: "im_info"\ninput_shape { dim: 1 dim: 3 }\n'
        + layer("Convolution", "convolution_param { num_output: 18 kernel_size: 1 }", name="score")
        + layer("Convolution", "convolution_param { num_output: 36 kernel_size: 1 }", name="deltas")
        + layer("Python", "python_param { module: 'rpn.proposal_layer' layer: 'ProposalLayer' "
                "param_str: \"'feat_stride': 16\" }", name="proposal",
                bottoms=("score", "deltas", "im_info"), tops=("rois",))
        + layer("InnerProduct", "inner_product_param { num_output: 4 }", name="ip", bottoms=("rois",)),
        {"score": [(18, 8, 1, 1), (18,)], "deltas": [(36, 8, 1, 1), (36,)], "ip": [(4, 5), (4,)]},
    ),
    "yolov3_detect_out.py": (
        tiny_net(
            "".join(layer("Convolution", f"convolution_param {{ num_output: 21 kernel_size: 1 stride: {s} }}",
                          name=f"head{s}") for s in (4, 2, 1))
            + layer("Yolov3DetectionOutput", "yolov3_detection_output_param { num_classes: 2 "
                    "anchors_scale: 32 anchors_scale: 16 anchors_scale: 8 }", name="det",
                    bottoms=("head4", "head2", "head1")),
            shape=(1, 3, 8, 8),
        ),
        {"head4": [(21, 3, 1, 1), (21,)], "head2": [(21, 3, 1, 1), (21,)], "head1": [(21, 3, 1, 1), (21,)]},
    ),
}


@pytest.mark.parametrize("plugin", sorted(EXAMPLE_NETS))
def test_example_plugins_on_the_cli(tmp_path: Path, plugin: str) -> None:
    text, expected = EXAMPLE_NETS[plugin]
    proto = _write(tmp_path, text)
    out = tmp_path / "net.caffemodel"
    r = _cli("random-weights", proto, "--plugin", EXAMPLES / plugin, "-o", out, "--seed", 1)
    assert r.returncode == 0, r.stderr
    got = {name: [a.shape for a in blobs] for name, blobs in read_caffemodel(out).items() if blobs}
    assert got == expected


def test_an_unknown_weight_kind_names_the_layer(tmp_path: Path) -> None:
    """Checked with real weights too, so a plugin's typo shows before anyone runs random-weights."""
    reg = MappingRegistry()
    reg.register(Framework.CAFFE, "Odd",
                 lambda node, g: g.op("Mul", [g.input(0), g.weight(0, shape=(1,), kind="gain")]))
    proto = _write(tmp_path, tiny_net(layer("Odd", name="odd")))
    w = tmp_path / "w.caffemodel"
    write_caffemodel(w, "t", [("odd", "Odd", [np.ones(1, np.float32)])])
    with pytest.raises(MappingError, match=r"layer 'odd' \(Odd\).*weight kind 'gain' is not one of"):
        convert(proto, weights=w, registry=reg)
