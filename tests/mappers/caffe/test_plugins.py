"""The example Caffe plugins: YOLOv3's detection output and Faster R-CNN's proposal layer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from opbridge.errors import UnsupportedOpError
from opbridge.mappers import DEFAULT_MAPPINGS, MappingRegistry
from opbridge.parsers.caffe import parse_caffe
from opbridge.tools.caffe_weights import write_random_weights
from tests.conftest import SHARED_MODELS, requires_shared_models

#: The YOLO plugin overrides a built-in mapping: each test's registrations are undone after it.
pytestmark = pytest.mark.usefixtures("isolated_registries")

PLUGINS = Path(__file__).resolve().parents[3] / "examples" / "plugins"
YOLO = PLUGINS / "yolov3_detect_out.py"
PROPOSAL = PLUGINS / "frcnn_proposal.py"

YOLO_LAYER = '''layer {{ name: "detection_out" type: "{type}" bottom: "{a}" bottom: "{b}" bottom: "{c}"
  top: "detection_out"
  yolov3_detection_output_param {{ num_classes: {nc} confidence_threshold: 0.5 nms_threshold: 0.45
    keep_top_k: 10 anchors_scale: 32 anchors_scale: 16 anchors_scale: 8 }} }}
'''


def _heads_net(tmp_path: Path, nc: int, type_: str = "Yolov3DetectionOutput") -> Path:
    shapes = {"h0": (1, 3 * (5 + nc), 2, 2), "h1": (1, 3 * (5 + nc), 4, 4), "h2": (1, 3 * (5 + nc), 8, 8)}
    head = "".join(f'input: "{n}"\ninput_shape {{ {" ".join(f"dim: {d}" for d in s)} }}\n'
                   for n, s in shapes.items())
    p = tmp_path / "yolo.prototxt"
    p.write_text(head + YOLO_LAYER.format(type=type_, a="h0", b="h1", c="h2", nc=nc))
    return p


def _builtin_only() -> MappingRegistry:
    reg = MappingRegistry()
    for e in DEFAULT_MAPPINGS.entries("caffe"):
        if "/mappers/caffe/" in e.defined_at.replace("\\", "/"):
            reg.register(e.framework, e.key_text, e.fn, since_opset=e.since, defined_at=e.defined_at)
    return reg


@pytest.mark.parametrize("type_", ["Yolov3DetectionOutput", "TPUYolov3DetectOut"])
def test_yolov3_detect_out_decodes_one_box(tmp_path: Path, type_: str) -> None:
    """One confident cell: head 0 (stride 32, input 64), anchor mask 6 (116 x 90), row 1,
    column 0, zero offsets: a box centred at (0.25, 0.75) of size 116/64 x 90/64 (by hand)."""
    nc = 2
    g = convert(_heads_net(tmp_path, nc, type_), plugins=[YOLO])
    feeds = {n: np.full(v.shape, -10.0, np.float32) for n, v in ((v.name, v) for v in g.inputs)}
    t = feeds["h0"].reshape(3, 5 + nc, 2, 2)
    t[0, 0:4, 1, 0] = 0.0
    t[0, 4, 1, 0] = 10.0   # objectness
    t[0, 6, 1, 0] = 10.0   # class 1
    y = ob.interpret(g, feeds)["detection_out"].reshape(-1, 7)
    rows = y[y[:, 1] >= 0]
    s = 1.0 / (1.0 + np.exp(-10.0))
    w, h = 116 / 64, 90 / 64
    np.testing.assert_allclose(rows, [[0, 1, s * s, 0.25 - w / 2, 0.75 - h / 2, 0.25 + w / 2, 0.75 + h / 2]],
                               rtol=1e-5)
    assert y.shape == (10, 7)


def test_yolov3_nms_suppresses_the_weaker_overlap(tmp_path: Path) -> None:
    nc = 1
    g = convert(_heads_net(tmp_path, nc), plugins=[YOLO])
    feeds = {v.name: np.full(v.shape, -10.0, np.float32) for v in g.inputs}
    t = feeds["h0"].reshape(3, 5 + nc, 2, 2)
    for col, conf in ((0, 10.0), (1, 3.0)):  # neighbouring cells, anchor 0: IoU 0.57 > 0.45
        t[0, 0:4, 0, col] = 0.0
        t[0, 4, 0, col] = conf
        t[0, 5, 0, col] = 10.0
    y = ob.interpret(g, feeds)["detection_out"].reshape(-1, 7)
    rows = y[y[:, 1] >= 0]
    assert len(rows) == 1 and rows[0, 2] > 0.99


def test_custom_layer_without_plugin_says_what_to_register(tmp_path: Path) -> None:
    # TPUYolov3DetectOut is the plugin's name alone (Yolov3DetectionOutput is built in)
    with pytest.raises(UnsupportedOpError, match=r"TPUYolov3DetectOut.*'detection_out'(.|\n)*mapping\("):
        convert(_heads_net(tmp_path, 2, "TPUYolov3DetectOut"), registry=_builtin_only())


def test_the_builtin_yolov3_layer_converts_without_the_plugin(tmp_path: Path) -> None:
    net = _heads_net(tmp_path, 2)
    biases = " ".join(f"biases: {b}" for b in (10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119, 116, 90,
                                                156, 198, 373, 326))
    masks = " ".join(f"mask: {m}" for m in (6, 7, 8, 3, 4, 5, 0, 1, 2))
    net.write_text(net.read_text().replace("keep_top_k: 10", f"keep_top_k: 10 {biases} {masks}"))
    g = convert(net, registry=_builtin_only())
    assert [n.op for n in g.nodes] == ["YoloDetectionOutput"]


_RPN_SHAPES = {"prob": (1, 18, 6, 7), "deltas": (1, 36, 6, 7), "im_info": (1, 3)}


def _rpn_net(tmp_path: Path) -> Path:
    """A net of py-faster-rcnn's proposal layer alone, fed by its three inputs."""
    head = "".join(f'input: "{n}"\ninput_shape {{ {" ".join(f"dim: {d}" for d in s)} }}\n'
                   for n, s in _RPN_SHAPES.items())
    p = tmp_path / "rpn.prototxt"
    p.write_text(head + '''layer { name: "proposal" type: "Python" bottom: "prob" bottom: "deltas"
  bottom: "im_info" top: "rois"
  python_param { module: "rpn.proposal_layer" layer: "ProposalLayer" param_str: "'feat_stride': 16" } }
''')
    return p


def test_proposal_rois(tmp_path: Path) -> None:
    """Behaviour of the proposal plugin on random scores: at most post_nms_top_n boxes, inside
    the image, sorted by nothing in particular but never overlapping by more than 0.7."""
    shapes = _RPN_SHAPES
    g = convert(_rpn_net(tmp_path), plugins=[PROPOSAL])
    rng = np.random.default_rng(0)
    feeds = {"prob": rng.uniform(0, 1, shapes["prob"]).astype(np.float32),
             "deltas": (rng.standard_normal(shapes["deltas"]) * 0.2).astype(np.float32),
             "im_info": np.array([[96, 112, 1.0]], np.float32)}
    rois = ob.interpret(g, feeds)["rois"]
    assert rois.shape == (300, 5)
    live = rois[np.any(rois[:, 1:] != 0, axis=1)]
    assert 0 < len(live) <= 300
    assert (live[:, 1] >= 0).all() and (live[:, 3] <= 111).all() and (live[:, 4] <= 95).all()
    x1, y1, x2, y2 = live[:, 1], live[:, 2], live[:, 3], live[:, 4]
    area = (x2 - x1 + 1) * (y2 - y1 + 1)
    for i in range(len(live)):
        iw = np.clip(np.minimum(x2[i], x2) - np.maximum(x1[i], x1) + 1, 0, None)
        ih = np.clip(np.minimum(y2[i], y2) - np.maximum(y1[i], y1) + 1, 0, None)
        iou = iw * ih / (area[i] + area - iw * ih)
        iou[i] = 0
        assert iou.max() <= 0.7 + 1e-6


#: py-faster-rcnn's generate_anchors() for base 16, ratios (0.5, 1, 2), scales (8, 16, 32), as
#: printed in its lib/rpn/generate_anchors.py; row 3 is ratio 1, scale 8.
PUBLISHED_ANCHOR_3 = (-56.0, -56.0, 71.0, 71.0)


def bbox_transform_inv(box: tuple[float, ...], delta: tuple[float, ...]) -> list[float]:
    """py-faster-rcnn's lib/fast_rcnn/bbox_transform.py, written out for one box: pixel-inclusive
    widths (+1), centre x1 + w/2, and no -1 on x2 (that came later, in Detectron)."""
    x1, y1, x2, y2 = box
    dx, dy, dw, dh = delta
    w, h = x2 - x1 + 1.0, y2 - y1 + 1.0
    cx, cy = x1 + 0.5 * w, y1 + 0.5 * h
    pcx, pcy = dx * w + cx, dy * h + cy
    pw, ph = float(np.exp(dw)) * w, float(np.exp(dh)) * h
    return [pcx - 0.5 * pw, pcy - 0.5 * ph, pcx + 0.5 * pw, pcy + 0.5 * ph]


@pytest.mark.parametrize("delta", [(0.0, 0.0, 0.0, 0.0), (0.1, 0.2, 0.3, -0.1)],
                         ids=["deltas=zero", "deltas=shift-and-scale"])
def test_proposal_decodes_one_anchor_like_py_faster_rcnn(tmp_path: Path, delta: tuple[float, ...]) -> None:
    """One anchor (cell row 4, column 5, anchor 3) scores highest, so it is the first roi; its
    box is the published anchor, shifted by the cell's stride offset and decoded independently."""
    shapes = _RPN_SHAPES
    g = convert(_rpn_net(tmp_path), plugins=[PROPOSAL])
    row, col, a = 4, 5, 3
    prob = np.full(shapes["prob"], 0.1, np.float32)
    prob[0, 9 + a, row, col] = 0.9          # foreground scores are channels A.. 2A-1
    deltas = np.zeros(shapes["deltas"], np.float32)
    deltas[0, 4 * a:4 * a + 4, row, col] = delta
    feeds = {"prob": prob, "deltas": deltas, "im_info": np.array([[300, 300, 1.0]], np.float32)}
    rois = ob.interpret(g, feeds)["rois"]
    sx, sy = 16.0 * col, 16.0 * row
    x1, y1, x2, y2 = PUBLISHED_ANCHOR_3
    want = bbox_transform_inv((x1 + sx, y1 + sy, x2 + sx, y2 + sy), delta)
    assert all(0 <= v <= 299 for v in want), "the case must not be clipped"
    np.testing.assert_allclose(rois[0], [0.0, *want], rtol=1e-5, atol=1e-3)


def test_unknown_python_layer_is_reported(tmp_path: Path) -> None:
    p = tmp_path / "py.prototxt"
    p.write_text('input: "x" input_shape { dim: 1 dim: 2 }\n'
                 'layer { name: "mine" type: "Python" bottom: "x" top: "y" '
                 'python_param { module: "m" layer: "MyLayer" } }\n')
    with pytest.raises(UnsupportedOpError, match=r"'mine'.*m\.MyLayer"):
        convert(p, plugins=[PROPOSAL])


@pytest.mark.slow
@requires_shared_models
def test_real_yolov3_with_the_plugin(tmp_path: Path) -> None:
    """The real YOLOv3 deploy (it has no detection layer) with the plugin's layer appended, in a
    temporary copy; random weights; runs to a (1, 1, 10, 7) detections tensor."""
    text = (SHARED_MODELS / "caffe" / "yolov3" / "deploy.prototxt").read_text()
    p = tmp_path / "yolov3_det.prototxt"
    p.write_text(text + YOLO_LAYER.format(type="Yolov3DetectionOutput", a="layer82-conv",
                                          b="layer94-conv", c="layer106-conv", nc=80))
    w = tmp_path / "w.caffemodel"
    write_random_weights(p, w, seed=0, plugins=[YOLO])
    g = convert(parse_caffe(p, weights=w), plugins=[YOLO])
    x = np.random.default_rng(0).standard_normal((1, 3, 416, 416)).astype(np.float32)
    out = ob.interpret(g, {"data": x})
    assert out["detection_out"].shape == (1, 1, 10, 7)
    assert np.isfinite(out["detection_out"]).all()
