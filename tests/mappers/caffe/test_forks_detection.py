"""Detection fork layers against outside references: OpenCV's Caffe importer for R-FCN's
PSROIPooling and the C++ Proposal layer, onnxruntime's RoiAlign for ROIAlign, and for the
MobileNet-YOLO output layers a scalar transcription of the fork's C++ loops written here."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from opbridge.errors import OpbridgeError
from opbridge.mappers import Framework, MappingRegistry
from opbridge.mappers.caffe import forks_detection
from tests.conftest import requires_cv2, requires_ort

from .caffe_ref import layer, tiny_net


def _net(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "net.prototxt"
    p.write_text(text)
    return p


ROIS = np.array([[0, 1, 2, 12, 9], [0, 0, 0, 19, 15], [0, 4.5, 3.5, 6, 8], [0, 7, 7, 7, 7]], np.float32)


@requires_cv2
@pytest.mark.parametrize("scale", [0.5, 1.0], ids=["spatial_scale=0.5", "spatial_scale=1"])
def test_psroi_pooling_against_opencv(tmp_path: Path, scale: float) -> None:
    import cv2

    text = tiny_net('input: "rois"\ninput_shape { dim: 4 dim: 5 }\n' + layer(
        "PSROIPooling", f"psroi_pooling_param {{ spatial_scale: {scale} output_dim: 2 group_size: 3 }}",
        bottoms=("data", "rois")), (1, 18, 8, 10))
    p = _net(tmp_path, text)
    x = np.random.default_rng(0).standard_normal((1, 18, 8, 10)).astype(np.float32)
    ours = ob.interpret(convert(p), {"data": x, "rois": ROIS})["y"]
    net = cv2.dnn.readNetFromCaffe(str(p))
    net.setInput(x, "data")
    net.setInput(ROIS, "rois")
    np.testing.assert_allclose(ours, net.forward("y"), rtol=1e-5, atol=1e-6)


def test_psroi_pooling_checks_the_channels(tmp_path: Path) -> None:
    text = tiny_net('input: "rois"\ninput_shape { dim: 4 dim: 5 }\n' + layer(
        "PSROIPooling", "psroi_pooling_param { output_dim: 3 group_size: 3 }", bottoms=("data", "rois")),
        (1, 18, 8, 10))
    with pytest.raises(OpbridgeError, match="output_dim"):
        convert(_net(tmp_path, text))


def _proposal_net(min_size: int, tops: tuple[str, ...] = ("rois",)) -> str:
    return tiny_net(
        'input: "deltas"\ninput_shape { dim: 1 dim: 36 dim: 6 dim: 8 }\n'
        'input: "im_info"\ninput_shape { dim: 1 dim: 3 }\n'
        + layer("Proposal", f"proposal_param {{ feat_stride: 16 min_size: {min_size} pre_nms_topn: 100 "
                "post_nms_topn: 20 ratio: 0.5 ratio: 1 ratio: 2 scale: 8 scale: 16 scale: 32 }",
                name="prop", bottoms=("data", "deltas", "im_info"), tops=tops), (1, 18, 6, 8))


def _proposal_feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"data": rng.uniform(0, 1, (1, 18, 6, 8)).astype(np.float32),
            "deltas": (rng.standard_normal((1, 36, 6, 8)) * 0.2).astype(np.float32),
            "im_info": np.array([[96, 128, 1.0]], np.float32)}


@requires_cv2
def test_proposal_against_opencv(tmp_path: Path) -> None:
    """min_size 0: OpenCV's Proposal skips py-faster-rcnn's small-box filter (tested below)."""
    import cv2

    p = _net(tmp_path, _proposal_net(0))
    feeds = _proposal_feeds()
    ours = ob.interpret(convert(p), feeds)["rois"]
    net = cv2.dnn.readNetFromCaffe(str(p))
    for k, v in feeds.items():
        net.setInput(v, k)
    ref = net.forward("prop")
    assert ref.shape == ours.shape == (20, 5)
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-3)


def test_proposal_drops_boxes_under_min_size(tmp_path: Path) -> None:
    """py-faster-rcnn _filter_boxes: width and height (+1) at least min_size * im_info[2]."""
    feeds = _proposal_feeds()
    g = convert(_net(tmp_path, _proposal_net(16, tops=("rois", "scores"))))
    out = ob.interpret(g, feeds)
    rois, scores = out["rois"], out["scores"]
    kept = rois[scores[:, 0] > 0]
    assert len(kept) > 0
    assert np.all(kept[:, 3] - kept[:, 1] + 1 >= 16) and np.all(kept[:, 4] - kept[:, 2] + 1 >= 16)
    assert np.all(np.diff(scores[: len(kept), 0]) <= 0)


@requires_ort
@pytest.mark.parametrize("params", ["roi_align_param { pooled_h: 3 pooled_w: 2 spatial_scale: 0.5 }",
                                    "roi_align_param { pooled_h: 2 pooled_w: 2 sampling_ratio: 2 }"],
                         ids=["sampling_ratio=absent", "sampling_ratio=2"])
def test_roi_align_against_onnxruntime(tmp_path: Path, params: str) -> None:
    """Detectron's RoIAlign (aligned=False): onnxruntime's RoiAlign, output_half_pixel."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    text = tiny_net('input: "rois"\ninput_shape { dim: 4 dim: 5 }\n'
                    + layer("ROIAlign", params, bottoms=("data", "rois")), (2, 3, 8, 10))
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 10)).astype(np.float32)
    rois = ROIS.copy()
    rois[1, 0] = 1
    ours = ob.interpret(convert(_net(tmp_path, text)), {"data": x, "rois": rois})["y"]
    ph, pw = (3, 2) if "pooled_h: 3" in params else (2, 2)
    node = helper.make_node("RoiAlign", ["x", "r", "i"], ["y"], output_height=ph, output_width=pw,
                            sampling_ratio=2 if "sampling_ratio" in params else 0,
                            spatial_scale=0.5 if "spatial_scale" in params else 1.0,
                            coordinate_transformation_mode="output_half_pixel")
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape),
        helper.make_tensor_value_info("r", onnx.TensorProto.FLOAT, (4, 4)),
        helper.make_tensor_value_info("i", onnx.TensorProto.INT64, (4,))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": x, "r": rois[:, 1:], "i": rois[:, 0].astype(np.int64)})[0]
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)


# -- YOLO: the fork's loops transcribed one value at a time ------------------------------------

def _sig(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


def _iou(a: list[float], b: list[float]) -> float:
    def ov(x1: float, w1: float, x2: float, w2: float) -> float:
        return min(x1 + w1 / 2, x2 + w2 / 2) - max(x1 - w1 / 2, x2 - w2 / 2)
    w, h = ov(a[0], a[2], b[0], b[2]), ov(a[1], a[3], b[1], b[3])
    inter = 0.0 if w < 0 or h < 0 else w * h
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def _rows(preds: list[tuple[float, int, list[float]]], nms: float) -> list[list[float]]:
    """Forward_cpu's tail: sort by confidence, ApplyNms, rows [0, class + 1, conf, l, t, r, b]."""
    preds = sorted(preds, key=lambda q: -q[0])
    gone: set[int] = set()
    for i in range(len(preds) - 1):
        if i in gone:
            continue
        for j in range(i + 1, len(preds)):
            if j not in gone and _iou(preds[i][2], preds[j][2]) >= nms:
                gone.add(j)
    return [[0, c + 1, conf, b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2]
            for k, (conf, c, b) in enumerate(preds) if k not in gone]


def _v3_ref(heads: list[np.ndarray], nc: int, nb: int, biases: list[float], mask: list[int],
            scales: list[int], thresh: float, nms: float) -> list[list[float]]:
    """yolov3_detection_output_layer.cpp Forward_cpu, batch 1."""
    preds = []
    for t, f in enumerate(heads):
        side_h, side_w = f.shape[2:]
        for s in range(side_h * side_w):
            y2, x2 = divmod(s, side_w)
            for n in range(nb):
                v = f[0, n * (5 + nc):(n + 1) * (5 + nc), y2, x2].astype(np.float64)
                k = mask[n + t * nb]
                box = [(x2 + _sig(v[0])) / side_w, (y2 + _sig(v[1])) / side_h,
                       math.exp(v[2]) * biases[2 * k] / (side_w * scales[t]),
                       math.exp(v[3]) * biases[2 * k + 1] / (side_h * scales[t])]
                for c in range(nc):
                    score = _sig(v[5 + c]) * _sig(v[4])
                    if score > thresh:
                        preds.append((score, c, box))
    return _rows(preds, nms)


def _v2_ref(f: np.ndarray, nc: int, nb: int, biases: list[float], thresh: float, nms: float) -> list[list[float]]:
    """yolo_detection_output_layer.cpp Forward_cpu, one head, batch 1."""
    preds = []
    side_h, side_w = f.shape[2:]
    for j in range(side_h):
        for i in range(side_w):
            for n in range(nb):
                v = f[0, n * (5 + nc):(n + 1) * (5 + nc), j, i].astype(np.float64)
                box = [(i + _sig(v[0])) / side_w, (j + _sig(v[1])) / side_h,
                       math.exp(v[2]) * biases[2 * n] / side_w, math.exp(v[3]) * biases[2 * n + 1] / side_h]
                e = np.exp(v[5:] - v[5:].max())
                prob = e / e.sum()
                conf = _sig(v[4]) * prob.max()
                if conf >= thresh:
                    preds.append((conf, int(prob.argmax()), box))
    return _rows(preds, nms)


def _check_rows(got: np.ndarray, want: list[list[float]], keep: int) -> None:
    got = got.reshape(-1, 7)
    assert got.shape == (keep, 7)
    n = min(len(want), keep)
    assert n > 0, "the case should find detections"
    np.testing.assert_allclose(got[:n], np.array(want[:n]), rtol=1e-4, atol=1e-5)
    assert np.all(got[n:] == -1)


def _heads(seed: int, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * 2).astype(np.float32) for s in shapes]


def _builtin_yolo() -> MappingRegistry:
    """The built-in YOLO mappings alone: the example plugin replaces the v3 one process-wide
    (override=True) once any test has loaded it."""
    reg = MappingRegistry()
    reg.register(Framework.CAFFE, "Yolov3DetectionOutput", forks_detection.yolov3_detection_output)
    reg.register(Framework.CAFFE, "YoloDetectionOutput", forks_detection.yolo_detection_output)
    return reg


def _conv_inputs(names: list[str], shapes: list[tuple[int, ...]]) -> str:
    return "".join(f'input: "{n}"\ninput_shape {{ {" ".join(f"dim: {d}" for d in s)} }}\n'
                   for n, s in zip(names, shapes))


@pytest.mark.parametrize(("thresh", "keep"), [(0.3, 200), (0.1, 5)], ids=["threshold=0.3", "keep_top_k=5"])
def test_yolov3_detection_output(tmp_path: Path, thresh: float, keep: int) -> None:
    nc, nb = 3, 3
    shapes = [(1, nb * (5 + nc), 2, 2), (1, nb * (5 + nc), 4, 4)]
    biases = [10, 14, 23, 27, 37, 58, 81, 82, 135, 169, 344, 319]
    mask = [3, 4, 5, 0, 1, 2]
    keep_txt = "" if keep == 200 else f" keep_top_k: {keep}"
    text = _conv_inputs(["h0", "h1"], shapes) + layer(
        "Yolov3DetectionOutput", "yolov3_detection_output_param { num_classes: 3 confidence_threshold: "
        f"{thresh} nms_threshold: 0.45 " + " ".join(f"biases: {b}" for b in biases) + " "
        + " ".join(f"mask: {m}" for m in mask) + f" anchors_scale: 32 anchors_scale: 16{keep_txt} }}",
        name="det", bottoms=("h0", "h1"))
    p = _net(tmp_path, 'name: "t"\n' + text)
    heads = _heads(2, shapes)
    got = ob.interpret(convert(p, registry=_builtin_yolo()), {"h0": heads[0], "h1": heads[1]})["det"]
    _check_rows(got, _v3_ref(heads, nc, nb, biases, mask, [32, 16], thresh, 0.45), keep)


def test_yolo_v2_detection_output(tmp_path: Path) -> None:
    nc, nb = 4, 5
    shape = (1, nb * (5 + nc), 3, 3)
    biases = [0.73, 0.87, 2.42, 2.65, 4.30, 7.04, 10.24, 4.59, 12.68, 11.87]
    text = _conv_inputs(["h0"], [shape]) + layer(
        "YoloDetectionOutput", "yolo_detection_output_param { num_classes: 4 num_box: 5 confidence_threshold: 0.2 "
        + " ".join(f"biases: {b}" for b in biases) + " }", name="det", bottoms=("h0",))
    p = _net(tmp_path, 'name: "t"\n' + text)
    head = _heads(4, [shape])[0]
    got = ob.interpret(convert(p, registry=_builtin_yolo()), {"h0": head})["det"]
    _check_rows(got, _v2_ref(head, nc, nb, biases, 0.2, 0.45), 200)


@pytest.mark.parametrize("missing", ["biases", "mask"])
def test_yolov3_required_fields(tmp_path: Path, missing: str) -> None:
    params = {"biases": "biases: 10 biases: 14", "mask": "mask: 0 mask: 0 mask: 0"}
    params.pop(missing)
    text = _conv_inputs(["h0"], [(1, 24, 2, 2)]) + layer(
        "Yolov3DetectionOutput", "yolov3_detection_output_param { num_classes: 3 anchors_scale: 32 "
        + " ".join(params.values()) + " }", name="det", bottoms=("h0",))
    with pytest.raises(OpbridgeError, match=missing):
        convert(_net(tmp_path, 'name: "t"\n' + text), registry=_builtin_yolo())


def _region_ref(x: np.ndarray, num: int, coords: int, classes: int, softmax: bool) -> np.ndarray:
    """darknet src/region_layer.c forward_region_layer: per anchor n, logistic over the
    entries 0, 1 (x, y) and coords (objectness) of every location; softmax over the classes
    entry by entry (index computed as darknet's entry_index)."""
    n_, c, h, w = x.shape
    flat = x.reshape(-1).astype(np.float64).copy()
    per = coords + 1 + classes

    def entry(b: int, n: int, e: int) -> int:
        return b * c * h * w + n * per * h * w + e * h * w

    for b in range(n_):
        for n in range(num):
            for e in (0, 1, coords):
                i = entry(b, n, e)
                flat[i:i + h * w] = 1.0 / (1.0 + np.exp(-flat[i:i + h * w]))
            if softmax:
                i = entry(b, n, coords + 1)
                block = flat[i:i + classes * h * w].reshape(classes, h * w)
                e_ = np.exp(block - block.max(axis=0))
                flat[i:i + classes * h * w] = (e_ / e_.sum(axis=0)).reshape(-1)
    return flat.reshape(x.shape)


@pytest.mark.parametrize(("params", "num", "classes", "softmax"), [
    ("region_param { classes: 3 coords: 4 num: 2 }", 2, 3, True),
    ("region_param { classes: 2 num: 3 softmax: false }", 3, 2, False),
], ids=["classes=3,num=2", "softmax=false,coords=absent"])
def test_region(tmp_path: Path, params: str, num: int, classes: int, softmax: bool) -> None:
    c = num * (5 + classes)
    x = np.random.default_rng(5).standard_normal((2, c, 3, 4)).astype(np.float32)
    got = ob.interpret(convert(_net(tmp_path, tiny_net(layer("Region", params), x.shape))), {"data": x})["y"]
    np.testing.assert_allclose(got, _region_ref(x, num, 4, classes, softmax), rtol=1e-5, atol=1e-6)


def test_region_checks_the_channels(tmp_path: Path) -> None:
    with pytest.raises(OpbridgeError, match=r"region_param.num"):
        convert(_net(tmp_path, tiny_net(layer("Region", "region_param { classes: 3 num: 2 }"), (1, 10, 3, 3))))
