"""The acceptance set of published Caffe fork nets (tests/data/caffe_nets/*/deploy.prototxt,
sources and licences in its README): each goes random-weights -> convert -> compile -> run on
the command line, each stage a fresh process, and the simulator's outputs match the reference
interpreter; where OpenCV's dnn runs the net (given small Python layers, written here from the
fork sources, for the fork layers it lacks) every blob matches it. A net whose only unsupported
layer is a ``Python`` layer without a plugin (CTPN) ends in a clean error, and runs once that
layer is cut off."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.cli.run import random_feeds
from opbridge.convert import convert
from opbridge.parsers.caffe import parse_caffe
from opbridge.tools.caffe_weights import write_random_weights
from tests.conftest import requires_cv2
from tests.mappers.caffe.caffe_ref import is_final, opencv_blobs

ROOT = Path(__file__).resolve().parents[2]
NETS = ROOT / "tests" / "data" / "caffe_nets"

#: name -> input shapes the tests run it at (the nets are fully convolutional: smaller than
#: published where that keeps the suite fast; SegNet's height stays 8 x odd so that its
#: pad_out_h unpooling lines up as at 360) and whether its command-line run (four fresh
#: processes, over 10 s) is marked slow.
RUNS: dict[str, tuple[dict[str, tuple[int, ...]], bool]] = {
    "segnet_basic_camvid": ({"data": (1, 3, 40, 48)}, False),
    "yolov3_tiny": ({"data": (1, 3, 128, 128)}, True),
    "mtcnn_pnet": ({"data": (1, 3, 48, 64)}, False),
    "ctpn": ({"data": (1, 3, 64, 96), "im_info": (1, 3)}, False),
    "heatmap_flic_fusion": ({"data": (1, 3, 32, 32)}, True),
    "mobilenet_yolov2_lite": ({"data": (1, 3, 96, 96)}, True),
    "hed": ({"data": (1, 3, 32, 32)}, False),
}
#: The nets whose only unsupported layer is a Python layer (no plugin): the layer's name.
PYTHON_LAYER = {"ctpn": "proposal"}


def _params(names: Any = None, cli: bool = False) -> list[Any]:
    return [pytest.param(n, marks=(pytest.mark.slow,) if cli and RUNS[n][1] else (), id=n)
            for n in RUNS if names is None or n in names]


def _shape_args(shapes: dict[str, tuple[int, ...]]) -> list[str]:
    return [a for n, s in shapes.items() for a in ("--input-shape", f"{n}={','.join(map(str, s))}")]


def _cli(*args: Any, code: int = 0) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "opbridge", *map(str, args)], capture_output=True,
                       text=True, timeout=1800)
    assert r.returncode == code, f"opbridge {args[0]} exited {r.returncode}:\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    return r


def test_every_net_has_a_source() -> None:
    readme = (NETS / "README.md").read_text()
    found = sorted(p.name for p in NETS.iterdir() if (p / "deploy.prototxt").is_file())
    assert found == sorted(RUNS)
    for name in found:
        assert f"`{name}`" in readme, f"tests/data/caffe_nets/README.md does not describe {name}"


@pytest.mark.parametrize("net", _params([n for n in RUNS if n not in PYTHON_LAYER], cli=True))
def test_cli_random_weights_convert_compile_run(net: str, tmp_path: Path) -> None:
    prototxt = NETS / net / "deploy.prototxt"
    shapes = _shape_args(RUNS[net][0])
    weights, obir = tmp_path / "net.caffemodel", tmp_path / "net.obir"
    prog, outs = tmp_path / "net.obprog", tmp_path / "outs.npz"
    _cli("random-weights", prototxt, "-o", weights, "--seed", 7, *shapes)
    _cli("convert", prototxt, "--weights", weights, *shapes, "-o", obir)
    _cli("compile", obir, "-o", prog)
    _cli("run", prog, "--random-input", "--seed", 3, "-o", outs)
    g = ob.load(obir)
    want = ob.interpret(g, random_feeds(g, 3))
    with np.load(outs) as got:
        assert sorted(got.files) == sorted(v.name for v in g.outputs)
        for v in g.outputs:
            _assert_close(got[v.name], want[v.name], f"{net}: output '{v.name}' (simulator vs interpreter)")


def _assert_close(got: np.ndarray, ref: np.ndarray, what: str, rtol: float = 1e-4) -> None:
    assert np.isfinite(got).all(), f"{what}: not finite"
    assert got.shape == ref.shape, f"{what}: shape {got.shape} vs {ref.shape}"
    err = float(np.abs(got.astype(np.float64) - ref).max()) / max(float(np.abs(ref).max()), 1e-6)
    assert err <= rtol, f"{what}: differs by {err:.3g} relative to the largest reference value"


@pytest.mark.parametrize("net", _params(PYTHON_LAYER))
def test_python_layer_without_plugin_is_a_clean_error(net: str, tmp_path: Path) -> None:
    r = _cli("random-weights", NETS / net / "deploy.prototxt", "-o", tmp_path / "w.caffemodel",
             *_shape_args(RUNS[net][0]), code=2)
    assert "Python" in r.stderr and f"'{PYTHON_LAYER[net]}'" in r.stderr
    assert r.stderr.startswith("error:") and "hint:" in r.stderr


def _without_python_layer(prototxt: Path, tmp_path: Path) -> Path:
    """The net up to its Python layer (the last layer of CTPN's deploy file)."""
    text = prototxt.read_text()
    cut = text.rindex("layer {")
    assert "type: 'Python'" in text[cut:]
    out = tmp_path / "deploy_cut.prototxt"
    out.write_text(text[:cut])
    return out


@pytest.mark.parametrize("net", _params(PYTHON_LAYER))
def test_python_layer_net_runs_up_to_that_layer(net: str, tmp_path: Path) -> None:
    """CTPN's Im2col, Transpose, Reverse and Lstm layers in their real net: the simulator
    matches the interpreter on every output."""
    proto = _without_python_layer(NETS / net / "deploy.prototxt", tmp_path)
    shapes = {k: v for k, v in RUNS[net][0].items() if k != "im_info"}
    weights = tmp_path / "net.caffemodel"
    write_random_weights(proto, weights, seed=1, input_shapes=shapes)
    g = convert(proto, weights=weights, input_shapes=shapes)
    feeds = random_feeds(g, 3)
    want = ob.interpret(g, feeds)
    got = ob.compile(g).run(feeds)
    for v in g.outputs:
        _assert_close(got[v.name], want[v.name], f"{net}: '{v.name}'")


# -- OpenCV as the reference, with Python layers for the fork layers it lacks ----------------

class _SegNetBN:
    """caffe-segnet bn_layer.cpp, bn_mode INFERENCE: scale * x + shift (blobs (1, C, 1, 1))."""

    def __init__(self, params: Any, blobs: Any) -> None:
        self.scale, self.shift = (np.asarray(b).reshape(1, -1, 1, 1) for b in blobs[:2])

    def getMemoryShapes(self, inputs: Any) -> Any:  # noqa: N802 - OpenCV's name
        return [inputs[0]]

    def forward(self, inputs: Any) -> Any:
        return [(inputs[0] * self.scale + self.shift).astype(np.float32)]


class _SegNetUpsample:
    """caffe-segnet upsample_layer.cpp: each value written at its mask index of a zero plane
    of H * scale - pad_out_h rows (loops as in Forward_cpu)."""

    def __init__(self, params: Any, blobs: Any) -> None:
        self.scale = int(params.get("scale", 2))
        self.pad_h = 1 if str(params.get("pad_out_h", "false")).lower() == "true" else 0
        self.pad_w = 1 if str(params.get("pad_out_w", "false")).lower() == "true" else 0

    def getMemoryShapes(self, inputs: Any) -> Any:  # noqa: N802 - OpenCV's name
        n, c, h, w = inputs[0]
        return [[n, c, h * self.scale - self.pad_h, w * self.scale - self.pad_w]]

    def forward(self, inputs: Any) -> Any:
        x, mask = inputs
        n, c, h, w = x.shape
        oh, ow = h * self.scale - self.pad_h, w * self.scale - self.pad_w
        top = np.zeros((n, c, oh * ow), np.float32)
        for b in range(n):
            for ch in range(c):
                for i, idx in enumerate(mask[b, ch].reshape(-1)):
                    top[b, ch, int(idx)] = x[b, ch].reshape(-1)[i]
        return [top.reshape(n, c, oh, ow)]


class _ArgMaxAxis1:
    """BVLC argmax_layer.cpp with axis 1, top_k 1: the index of the largest channel, as float
    (random inputs have no ties)."""

    def __init__(self, params: Any, blobs: Any) -> None:
        pass

    def getMemoryShapes(self, inputs: Any) -> Any:  # noqa: N802 - OpenCV's name
        n, _, h, w = inputs[0]
        return [[n, 1, h, w]]

    def forward(self, inputs: Any) -> Any:
        return [inputs[0].argmax(axis=1)[:, None].astype(np.float32)]


class _Yolov3Out:
    """The MobileNet-YOLO Yolov3DetectionOutput, through the scalar transcription of its
    Forward_cpu in tests/mappers/caffe/test_forks_detection.py; rows padded to 200 with -1."""

    def __init__(self, params: Any, blobs: Any) -> None:
        self.p = params

    def getMemoryShapes(self, inputs: Any) -> Any:  # noqa: N802 - OpenCV's name
        return [[1, 1, 200, 7]]

    def forward(self, inputs: Any) -> Any:
        from tests.mappers.caffe.test_forks_detection import _v3_ref

        text = (NETS / "yolov3_tiny" / "deploy.prototxt").read_text()
        block = text[text.index("yolov3_detection_output_param"):]
        def values(key: str) -> list[float]:
            return [float(line.split(":")[1]) for line in block.splitlines() if line.strip().startswith(key + ":")]
        rows = _v3_ref(list(inputs), int(values("num_classes")[0]), 3, values("biases"),
                       [int(v) for v in values("mask")], [int(v) for v in values("anchors_scale")], 0.01,
                       values("nms_threshold")[0])
        out = np.full((200, 7), -1.0, np.float32)
        if rows:
            out[: min(len(rows), 200)] = np.array(rows[:200], np.float32)
        return [out.reshape(1, 1, 200, 7)]


def _for_opencv(prototxt: Path, tmp_path: Path) -> Path:
    """The prototxt without the filler blocks nested in fork parameter blocks (training-time
    initialisers): OpenCV's importer reads an unknown block only as flat name/value pairs.
    The fork's DepthwiseConvolution, which OpenCV does not know, is spelled Convolution: its
    layers already set group to the channel count, which is all the fork layer adds."""
    text = re.sub(r"(scale|shift)_filler\s*\{[^{}]*\}", "", prototxt.read_text())
    text = text.replace('type: "DepthwiseConvolution"', 'type: "Convolution"')
    out = tmp_path / "opencv.prototxt"
    out.write_text(text)
    return out


class _YoloV2Out:
    """The MobileNet-YOLO YoloDetectionOutput, through the scalar transcription of its
    Forward_cpu in tests/mappers/caffe/test_forks_detection.py; rows padded to 200 with -1."""

    def __init__(self, params: Any, blobs: Any) -> None:
        pass

    def getMemoryShapes(self, inputs: Any) -> Any:  # noqa: N802 - OpenCV's name
        return [[1, 1, 200, 7]]

    def forward(self, inputs: Any) -> Any:
        from tests.mappers.caffe.test_forks_detection import _v2_ref

        text = (NETS / "mobilenet_yolov2_lite" / "deploy.prototxt").read_text()
        block = text[text.index("yolo_detection_output_param"):]
        biases = [float(line.split(":")[1]) for line in block.splitlines() if line.strip().startswith("biases:")]
        rows = _v2_ref(inputs[0], 20, 5, biases, 0.300000011921, 0.449999988079)
        out = np.full((200, 7), -1.0, np.float32)
        if rows:
            out[: min(len(rows), 200)] = np.array(rows[:200], np.float32)
        return [out.reshape(1, 1, 200, 7)]


OPENCV_LAYERS = {"segnet_basic_camvid": {"BN": _SegNetBN, "Upsample": _SegNetUpsample,
                                         "ArgMax": _ArgMaxAxis1},
                 "yolov3_tiny": {"Yolov3DetectionOutput": _Yolov3Out}, "mtcnn_pnet": {},
                 "heatmap_flic_fusion": {}, "mobilenet_yolov2_lite": {"YoloDetectionOutput": _YoloV2Out},
                 "hed": {}}


@requires_cv2
@pytest.mark.parametrize("net", _params(OPENCV_LAYERS))
def test_matches_opencv(net: str, tmp_path: Path) -> None:
    import cv2

    prototxt = NETS / net / "deploy.prototxt"
    shapes = RUNS[net][0]
    weights = tmp_path / "net.caffemodel"
    write_random_weights(prototxt, weights, seed=0, input_shapes=shapes)
    origin = parse_caffe(prototxt, weights=weights, input_shapes=shapes)
    g = convert(origin)
    feeds = {k: np.random.default_rng(0).standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    ours = ob.interpret(g, feeds, keep_intermediates=True)
    for name, cls in OPENCV_LAYERS[net].items():
        cv2.dnn_registerLayer(name, cls)
    try:
        cvnet = cv2.dnn.readNetFromCaffe(str(_for_opencv(prototxt, tmp_path)), str(weights))
        cvnet.enableFusion(False)
        for k, v in feeds.items():
            cvnet.setInput(v, k)
        final = {o: (n.name, i) for n in origin.nodes for i, o in enumerate(n.outputs)
                 if is_final(o, n.name) and o in ours}
        # OpenCV's importer lists the YOLOv2 net's layer conv22_indoor under its top's name
        # (conv22): a layer OpenCV does not list is looked up by its top
        known = set(cvnet.getLayerNames())
        final = {b: (lay if lay in known else b, i) for b, (lay, i) in final.items()}
        refs = opencv_blobs(cvnet, final)
    finally:
        for name in OPENCV_LAYERS[net]:
            cv2.dnn_unregisterLayer(name)
    assert {v.name for v in g.outputs} <= set(final)
    for blob, ref in refs.items():
        _assert_close(ours[blob], np.asarray(ref), f"{net}: blob '{blob}' vs OpenCV")
