"""PriorBox, DetectionOutput and ROIPooling against OpenCV's Caffe importer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import requires_cv2

from .caffe_ref import assert_blobs_close, layer, run_ours_and_opencv

pytestmark = requires_cv2


def _net(layers: str, inputs: dict[str, tuple[int, ...]]) -> str:
    head = "".join(
        f'input: "{n}"\ninput_shape {{ {" ".join(f"dim: {d}" for d in s)} }}\n' for n, s in inputs.items()
    )
    return f'name: "t"\n{head}{layers}\n'


PRIOR_CASES = {
    "min_size only": "min_size: 8 variance: 0.1 clip: false",
    "min,max,ar=2,flip=absent": "min_size: 8 max_size: 16 aspect_ratio: 2 variance: 0.2 clip: false",
    "flip=false,clip=true": "min_size: 10 aspect_ratio: 2 aspect_ratio: 3 flip: false clip: true variance: 0.1",
    "variance x4,step,offset": ("min_size: 6 max_size: 12 aspect_ratio: 2 variance: 0.1 variance: 0.1 "
                                "variance: 0.2 variance: 0.2 step: 5 offset: 0.25 clip: false"),
    "two min sizes": "min_size: 4 min_size: 8 max_size: 6 max_size: 12 variance: 0.1 clip: false",
}


@pytest.mark.parametrize("params", list(PRIOR_CASES.values()), ids=list(PRIOR_CASES))
def test_prior_box(tmp_path: Path, params: str) -> None:
    inputs = {"feat": (1, 2, 4, 5), "data": (1, 3, 32, 30)}
    text = _net(layer("PriorBox", f"prior_box_param {{ {params} }}", bottoms=("feat", "data")), inputs)
    ours, refs = run_ours_and_opencv(tmp_path, text, inputs)
    assert_blobs_close(ours, refs)


@pytest.mark.parametrize(("extra", "img_h", "img_w"), [("", 20, 40), ("img_h: 30 img_w: 60", 30, 60)],
                         ids=["img_h/img_w=absent", "img_h/img_w"])
def test_prior_box_defaults_and_explicit_sizes(tmp_path: Path, extra: str, img_h: int, img_w: int) -> None:
    """SSD's defaults (OpenCV's differ: it clips by default and needs a variance): clip=false,
    variance 0.1; step_h/step_w and img_h/img_w, which OpenCV reads differently. Boxes derived
    by hand from SSD's PriorBoxLayer::Forward_cpu."""
    import opbridge as ob
    from opbridge.convert import convert

    proto = tmp_path / "net.prototxt"
    inputs = {"feat": (1, 1, 2, 2), "data": (1, 3, 20, 40)}
    proto.write_text(_net(layer("PriorBox", f"prior_box_param {{ min_size: 12 step_h: 10 step_w: 20 {extra} }}",
                                bottoms=("feat", "data")), inputs))
    g = convert(proto)
    feeds = {k: np.zeros(v, np.float32) for k, v in inputs.items()}
    out = ob.interpret(g, feeds)
    y = out["y"] if "y" in out else g.values()["y"].data
    boxes = []
    for h in range(2):
        for w in range(2):
            cx, cy = (w + 0.5) * 20, (h + 0.5) * 10
            boxes.append([(cx - 6) / img_w, (cy - 6) / img_h, (cx + 6) / img_w, (cy + 6) / img_h])
    np.testing.assert_allclose(y[0, 0].reshape(-1, 4), np.array(boxes), rtol=1e-6)
    assert y[0, 0].min() < 0  # not clipped
    np.testing.assert_allclose(y[0, 1], 0.1)


# OpenCV needs share_location, background_label_id, keep_top_k, nms top_k and code_type given
# explicitly, and does not know CORNER_SIZE.
DET_BASE = {"share_location": "true", "background_label_id": "0", "keep_top_k": "100",
            "nms_param": "{ nms_threshold: 0.45 top_k: 100 }", "confidence_threshold": "0.3"}
DET_CASES = {
    "CENTER_SIZE,keep_top_k=5": {"code_type": "CENTER_SIZE", "keep_top_k": "5"},
    "code_type=CORNER": {"code_type": "CORNER"},
    "nms top_k,eta": {"code_type": "CENTER_SIZE", "confidence_threshold": "0.2",
                      "nms_param": "{ nms_threshold: 0.3 top_k: 5 eta: 0.9 }"},
    "share_location=false": {"code_type": "CORNER", "share_location": "false"},
}


@pytest.mark.parametrize("case", list(DET_CASES.values()), ids=list(DET_CASES))
def test_detection_output(tmp_path: Path, case: dict[str, str]) -> None:
    """Priors from a PriorBox layer, random small offsets, peaked class scores."""
    classes = 4
    priors = 3 * 3 * 4  # 3x3 map, min + max + ar 2 and 1/2
    fields = {**DET_BASE, **case}
    loc_classes = 1 if fields["share_location"] == "true" else classes
    rng = np.random.default_rng(7)
    conf = rng.uniform(0.0, 0.2, (1, priors, classes)).astype(np.float32)
    hot = rng.choice(priors, 14, replace=False)
    conf[0, hot, rng.integers(0, classes, 14)] = rng.uniform(0.4, 0.99, 14)
    feeds = {
        "feat": rng.standard_normal((1, 1, 3, 3)).astype(np.float32),
        "data": rng.standard_normal((1, 3, 30, 30)).astype(np.float32),
        "loc": (rng.standard_normal((1, priors * 4 * loc_classes)) * 0.3).astype(np.float32),
        "conf": conf.reshape(1, -1),
    }
    inputs = {k: v.shape for k, v in feeds.items()}
    params = " ".join(f"{k} {v}" if v.startswith("{") else f"{k}: {v}" for k, v in fields.items())
    text = _net(
        layer("PriorBox", "prior_box_param { min_size: 8 max_size: 16 aspect_ratio: 2 clip: false variance: 0.1 "
              "variance: 0.1 variance: 0.2 variance: 0.2 }", name="pb", bottoms=("feat", "data"))
        + layer("DetectionOutput", f"detection_output_param {{ num_classes: {classes} {params} }}",
                name="det", bottoms=("loc", "conf", "pb")),
        inputs,
    )
    ours, refs = run_ours_and_opencv(tmp_path, text, inputs, feeds=feeds)
    got = ours["det"].reshape(-1, 7)
    ref = np.asarray(refs["det"]).reshape(-1, 7)
    got = got[(got[:, 1] >= 0) & (got[:, 2] > 0)]
    ref = ref[(ref[:, 1] >= 0) & (ref[:, 2] > 0)]
    assert len(got) > 0
    assert len(got) == len(ref)

    def order(a: np.ndarray) -> np.ndarray:  # Caffe lists by label; OpenCV by score
        return a[np.lexsort((-a[:, 2], a[:, 1], a[:, 0]))]

    np.testing.assert_allclose(order(got), order(ref), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("code_type", "encoded"), [("CENTER_SIZE", False), ("CENTER_SIZE", True),
                                                    ("CORNER_SIZE", False), ("CORNER", False)])
def test_decode_boxes(code_type: str, encoded: bool) -> None:
    """SSD's DecodeBBox written out per box (OpenCV lacks CORNER_SIZE and rejects 2-row priors
    with variance_encoded_in_target)."""
    from opbridge.ir.ops.detection import decode_boxes

    prior = np.array([[0.1, 0.2, 0.5, 0.4], [0.3, 0.3, 0.9, 0.8]], np.float32)
    var = np.array([[0.1, 0.1, 0.2, 0.2]] * 2, np.float32)
    loc = np.array([[0.5, -0.2, 0.3, -0.1], [0.0, 0.4, -0.5, 0.2]], np.float32)
    v = np.ones_like(var) if encoded else var
    want = []
    for (x1, y1, x2, y2), (lx, ly, lw, lh), (v0, v1, v2, v3) in zip(prior, loc, v):
        pw, ph = x2 - x1, y2 - y1
        if code_type == "CENTER_SIZE":
            cx, cy = v0 * lx * pw + (x1 + x2) / 2, v1 * ly * ph + (y1 + y2) / 2
            w, h = np.exp(v2 * lw) * pw, np.exp(v3 * lh) * ph
            want.append([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2])
        elif code_type == "CORNER_SIZE":
            want.append([x1 + v0 * lx * pw, y1 + v1 * ly * ph, x2 + v2 * lw * pw, y2 + v3 * lh * ph])
        else:
            want.append([x1 + v0 * lx, y1 + v1 * ly, x2 + v2 * lw, y2 + v3 * lh])
    np.testing.assert_allclose(decode_boxes(loc, prior, var, code_type, encoded), want, rtol=1e-6)


def test_background_label_none_keeps_class_0(tmp_path: Path) -> None:
    """background_label_id -1: class 0 is a class like the others (OpenCV fails on it)."""
    import opbridge as ob
    from opbridge.convert import convert

    inputs = {"loc": (1, 8), "conf": (1, 4), "prior": (1, 2, 8)}
    proto = tmp_path / "net.prototxt"
    proto.write_text(_net(layer("DetectionOutput", "detection_output_param { num_classes: 2 "
                                "background_label_id: -1 confidence_threshold: 0.5 }",
                                bottoms=("loc", "conf", "prior")), inputs))
    prior = np.array([[[0.1, 0.1, 0.3, 0.3, 0.6, 0.6, 0.9, 0.9], [0.1] * 8]], np.float32)
    feeds = {"loc": np.zeros((1, 8), np.float32), "conf": np.array([[0.9, 0.1, 0.2, 0.8]], np.float32),
             "prior": prior}
    y = ob.interpret(convert(proto), feeds)["y"].reshape(-1, 7)
    rows = y[y[:, 1] >= 0]
    np.testing.assert_allclose(rows, [[0, 0, 0.9, 0.1, 0.1, 0.3, 0.3], [0, 1, 0.8, 0.6, 0.6, 0.9, 0.9]],
                               rtol=1e-6)


@pytest.mark.parametrize(("params", "rois"), [
    ("pooled_h: 2 pooled_w: 3 spatial_scale: 0.5", [[0, 1, 1, 10, 8], [0, 0, 0, 3, 3], [0, 5.5, 2.5, 15, 15]]),
    ("pooled_h: 3 pooled_w: 3", [[0, 0, 0, 7, 7], [0, 2, 1, 3, 6], [0, 6, 6, 6, 6]]),
], ids=["spatial_scale=0.5", "spatial_scale=absent"])
def test_roi_pooling(tmp_path: Path, params: str, rois: list[list[float]]) -> None:
    feeds = {
        "data": np.random.default_rng(3).standard_normal((1, 4, 8, 8)).astype(np.float32),
        "rois": np.asarray(rois, np.float32),
    }
    inputs = {k: v.shape for k, v in feeds.items()}
    text = _net(layer("ROIPooling", f"roi_pooling_param {{ {params} }}", bottoms=("data", "rois")), inputs)
    ours, refs = run_ours_and_opencv(tmp_path, text, inputs, feeds=feeds)
    assert_blobs_close(ours, refs, rtol=0.0)


def test_detection_op_defaults_follow_the_schema() -> None:
    """The IR op's defaults are the SSD schema's (detection_output_param, nms_param)."""
    from opbridge.ir.opdef import get_op
    from opbridge.parsers.caffe import layer_defaults
    from opbridge.proto import caffe_pb2

    op = get_op("DetectionOutput").params
    det = layer_defaults("detection_output_param")
    for name in ("share_location", "background_label_id", "keep_top_k", "code_type",
                 "variance_encoded_in_target"):
        assert op[name].default == det[name], name
    nms = caffe_pb2.NonMaximumSuppressionParameter.DESCRIPTOR.fields_by_name
    assert op["nms_threshold"].default == pytest.approx(nms["nms_threshold"].default_value)
    assert op["eta"].default == pytest.approx(nms["eta"].default_value)
