"""YOLO post-processing of the MobileNet-YOLO Caffe fork (eric612/MobileNet-YOLO
src/caffe/layers/yolo_detection_output_layer.cpp for v2, yolov3_detection_output_layer.cpp
for v3): decode every head's boxes, keep those above the confidence threshold, sort by
confidence, class-agnostic greedy NMS (IoU of centre-size boxes >= threshold suppresses).
Rows [image, label + 1, confidence, left, top, right, bottom], coordinates normalised to the
input image; a host op with a static output of keep_top_k rows per image, rows past the
detections kept are -1."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op
from .common import FLOATS


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def _iou_cs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of centre-size box ``a`` (4,) with boxes ``b`` (K, 4), as the fork's box_iou."""
    def overlap(x1: Any, w1: Any, x2: Any, w2: Any) -> Any:
        return np.minimum(x1 + w1 / 2, x2 + w2 / 2) - np.maximum(x1 - w1 / 2, x2 - w2 / 2)
    ow = overlap(a[0], a[2], b[:, 0], b[:, 2])
    oh = overlap(a[1], a[3], b[:, 1], b[:, 3])
    inter = np.where((ow < 0) | (oh < 0), 0.0, ow * oh)
    union = a[2] * a[3] + b[:, 2] * b[:, 3] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return inter / union


def _nms(boxes: np.ndarray, thresh: float) -> list[int]:
    """The fork's ApplyNms over boxes already sorted by confidence."""
    dropped = np.zeros(len(boxes), bool)
    for i in range(len(boxes) - 1):
        if dropped[i]:
            continue
        rest = np.arange(i + 1, len(boxes))
        rest = rest[~dropped[rest]]
        if rest.size:
            dropped[rest[_iou_cs(boxes[i], boxes[rest]) >= thresh]] = True
    return [i for i in range(len(boxes)) if not dropped[i]]


def _decode_v2(f: np.ndarray, *, num_box: int, num_classes: int, biases: Any,
               confidence_threshold: float) -> list[tuple[float, int, np.ndarray]]:
    """One image's head (A * (5 + C), H, W): softmax classes, the best class per box."""
    _, h, w = f.shape
    t = f.reshape(num_box, -1, h, w)
    gy, gx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    out = []
    for a in range(num_box):
        box = np.stack([(gx + _sigmoid(t[a, 0])) / w, (gy + _sigmoid(t[a, 1])) / h,
                        np.exp(t[a, 2]) * biases[2 * a] / w, np.exp(t[a, 3]) * biases[2 * a + 1] / h], -1)
        logits = t[a, 5:5 + num_classes]
        e = np.exp(logits - logits.max(axis=0))
        prob = e / e.sum(axis=0)
        conf = _sigmoid(t[a, 4]) * prob.max(axis=0)
        cls = prob.argmax(axis=0)
        for y, x in zip(*np.nonzero(conf >= confidence_threshold)):
            out.append((float(conf[y, x]), int(cls[y, x]), box[y, x]))
    return out


def _decode_v3(f: np.ndarray, head: int, *, num_box: int, num_classes: int, biases: Any, mask: Any,
               anchors_scale: Any, confidence_threshold: float) -> list[tuple[float, int, np.ndarray]]:
    """One image's head: sigmoid classes times objectness, every class above the threshold;
    anchor k = mask[head * num_box + a], sizes over the input (head size * anchors_scale)."""
    _, h, w = f.shape
    t = f.reshape(num_box, -1, h, w)
    gy, gx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    out = []
    for a in range(num_box):
        k = int(mask[head * num_box + a])
        box = np.stack([(gx + _sigmoid(t[a, 0])) / w, (gy + _sigmoid(t[a, 1])) / h,
                        np.exp(t[a, 2]) * biases[2 * k] / (w * anchors_scale[head]),
                        np.exp(t[a, 3]) * biases[2 * k + 1] / (h * anchors_scale[head])], -1)
        score = _sigmoid(t[a, 5:5 + num_classes]) * _sigmoid(t[a, 4])[None]
        for c, y, x in zip(*np.nonzero(score > confidence_threshold)):
            out.append((float(score[c, y, x]), int(c), box[y, x]))
    return out


def yolo_detection_output(*heads: np.ndarray, version: int, num_classes: int, num_box: int,
                          confidence_threshold: float, nms_threshold: float, biases: Any,
                          mask: Any, anchors_scale: Any, keep_top_k: int) -> np.ndarray:
    n = heads[0].shape[0]
    out = np.full((n * keep_top_k, 7), -1.0, dtype=heads[0].dtype)
    row = 0
    for b in range(n):
        found: list[tuple[float, int, np.ndarray]] = []
        for i, f in enumerate(heads):
            if version == 2:
                found += _decode_v2(f[b], num_box=num_box, num_classes=num_classes, biases=biases,
                                    confidence_threshold=confidence_threshold)
            else:
                found += _decode_v3(f[b], i, num_box=num_box, num_classes=num_classes, biases=biases,
                                    mask=mask, anchors_scale=anchors_scale,
                                    confidence_threshold=confidence_threshold)
        found.sort(key=lambda d: -d[0])  # stable: equal confidences keep the decoding order
        if not found:
            continue
        boxes = np.array([d[2] for d in found], np.float64)
        for j in _nms(boxes, nms_threshold)[:keep_top_k]:
            conf, cls, (x, y, bw, bh) = found[j][0], found[j][1], found[j][2]
            out[row] = [b, cls + 1, conf, x - bw / 2, y - bh / 2, x + bw / 2, y + bh / 2]
            row += 1
    return out.reshape(1, 1, n * keep_top_k, 7)


def _shape(ctx: ShapeContext) -> Any:
    version, nb, nc = ctx.attr("version"), ctx.attr("num_box"), ctx.attr("num_classes")
    heads = ctx.num_inputs
    for i in range(heads):
        s = ctx.input_shape(i)
        if len(s) != 4 or s[1] < nb * (5 + nc):
            raise ctx.error(f"head {i} has shape {list(s)}: expected (N, num_box * (5 + num_classes), H, W) "
                            f"with num_box {nb}, num_classes {nc}",
                            hint="check the layer's num_box and num_classes params against its input's "
                                 "channels")
    if version == 2 and len(ctx.attr("biases")) < 2 * nb:
        raise ctx.error(f"needs 2 biases per box ({2 * nb}), got {len(ctx.attr('biases'))}", attr="biases",
                        hint="give 2 biases per box")
    if version == 3:
        mask, scales, biases = ctx.attr("mask"), ctx.attr("anchors_scale"), ctx.attr("biases")
        if len(mask) < heads * nb or len(scales) < heads:
            raise ctx.error(f"{heads} heads need {heads * nb} mask values and {heads} anchors_scale values",
                            attr="mask",
                            hint="give num_box mask values and one anchors_scale value per head")
        if any(not 0 <= int(k) < len(biases) // 2 for k in mask):
            raise ctx.error(f"mask values must index the {len(biases) // 2} bias pairs", attr="mask",
                            hint="mask values index the bias pairs: check the mask and biases params")
    n = ctx.input_shape(0)[0]
    return (1, 1, n * ctx.attr("keep_top_k"), 7), ctx.input_dtype(0)


(
    define_op("YoloDetectionOutput")
    .doc("YOLO v2 / v3 post-processing of the MobileNet-YOLO Caffe fork: heads decoded, "
         "thresholded, sorted, class-agnostic NMS; (1, 1, N * keep_top_k, 7) rows [image, "
         "label + 1, confidence, left, top, right, bottom], unused rows -1.")
    .input("heads", "T", variadic=True).output("detections", "T")
    .param("version", "int", default=3, allowed=(2, 3))
    .param("num_classes", "int", default=20, minimum=1)
    .param("num_box", "int", default=3, minimum=1, doc="anchors per head")
    .param("confidence_threshold", "float", default=0.01)
    .param("nms_threshold", "float", default=0.45)
    .param("biases", "floats", default=(), doc="anchor (w, h) pairs: grid cells (v2) or input pixels (v3)")
    .param("mask", "ints", default=(), doc="v3: the anchor of each head's box, num_box per head")
    .param("anchors_scale", "ints", default=(), doc="v3: each head's stride in input pixels")
    .param("keep_top_k", "int", default=200, minimum=1, doc="rows of the static output per image")
    .type_param("T", FLOATS)
    .shape_fn(_shape)
    .compute(yolo_detection_output)
    .placement("cpu")  # sorting and NMS run on the host
)
