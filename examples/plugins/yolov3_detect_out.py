"""YOLOv3's detection post-process as an opbridge plugin (``--plugin yolov3_detect_out.py``).

The Sophgo bmcompiler document adds YOLOv3's ``detection_output`` as a custom TPU layer
(``TPUYolov3DetectOut`` in the prototxt, a user layer with a shape-inference function and a
kernel). Here the same layer is one Python file with the three registrations of any custom op,
and no schema change: the layer's parameter block is read generically by the Caffe parser.

1. ``define_op("Yolov3DetectionOutput")``: three feature maps in, detections out; a shape
   function (static (1, 1, keep_top_k * N, 7) rows) and the numpy compute (the reference
   semantics, darknet's decoding and per-class NMS);
2. ``register_custom_op(...)`` (CANN style): the Caffe layer's attributes copied onto the op;
3. ``ImplyType.CPU``: post-processing runs on the host, between TPU segments.

The layer, appended to a YOLOv3 deploy prototxt whose three heads are ``layer82-conv``,
``layer94-conv`` and ``layer106-conv`` (strides 32, 16, 8)::

    layer {
      name: "detection_out" type: "Yolov3DetectionOutput"
      bottom: "layer82-conv" bottom: "layer94-conv" bottom: "layer106-conv"
      top: "detection_out"
      yolov3_detection_output_param {
        num_classes: 80 confidence_threshold: 0.5 nms_threshold: 0.45 keep_top_k: 200
        biases: 10 biases: 13 biases: 16 biases: 30 biases: 33 biases: 23 biases: 30 biases: 61
        biases: 62 biases: 45 biases: 59 biases: 119 biases: 116 biases: 90 biases: 156
        biases: 198 biases: 373 biases: 326
        mask: 6 mask: 7 mask: 8 mask: 3 mask: 4 mask: 5 mask: 0 mask: 1 mask: 2
        anchors_scale: 32 anchors_scale: 16 anchors_scale: 8
      }
    }

Rows are [image, label, score, xmin, ymin, xmax, ymax] with coordinates normalised to the
network input; rows past the detections found are -1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opbridge as ob

COCO_BIASES = (10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119, 116, 90, 156, 198, 373, 326)


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    ix = np.clip(np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]), 0, None)
    iy = np.clip(np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]), 0, None)
    inter = ix * iy
    area = lambda b: (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])  # noqa: E731
    return inter / np.maximum(area(box) + area(others) - inter, 1e-12)


def yolov3_detect(*feats: np.ndarray, num_classes: int, confidence_threshold: float,
                  nms_threshold: float, keep_top_k: int, biases: tuple[float, ...],
                  mask: tuple[int, ...], anchors_scale: tuple[int, ...]) -> np.ndarray:
    """Decode each head (N, A * (5 + C), h, w) as darknet does, then per-class NMS."""
    n = feats[0].shape[0]
    per_head = len(mask) // len(feats)
    rows: list[list[float]] = []
    for b in range(n):
        boxes, scores, labels = [], [], []
        for i, f in enumerate(feats):
            _, _, h, w = f.shape
            in_h, in_w = h * anchors_scale[i], w * anchors_scale[i]
            t = f[b].reshape(per_head, 5 + num_classes, h, w)
            gy, gx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
            for a in range(per_head):
                k = mask[i * per_head + a]
                bx = (gx + _sigmoid(t[a, 0])) / w
                by = (gy + _sigmoid(t[a, 1])) / h
                bw = np.exp(t[a, 2]) * biases[2 * k] / in_w
                bh = np.exp(t[a, 3]) * biases[2 * k + 1] / in_h
                obj = _sigmoid(t[a, 4])
                cls = obj[None] * _sigmoid(t[a, 5:])
                c, yy, xx = np.nonzero(cls > confidence_threshold)
                for cc, y, x in zip(c, yy, xx):
                    boxes.append([bx[y, x] - bw[y, x] / 2, by[y, x] - bh[y, x] / 2,
                                  bx[y, x] + bw[y, x] / 2, by[y, x] + bh[y, x] / 2])
                    scores.append(cls[cc, y, x])
                    labels.append(cc)
        boxes_a, scores_a, labels_a = np.array(boxes).reshape(-1, 4), np.array(scores), np.array(labels)
        kept: list[int] = []
        for c in np.unique(labels_a):
            idx = np.nonzero(labels_a == c)[0]
            idx = idx[np.argsort(-scores_a[idx], kind="stable")]
            keep_c: list[int] = []
            for j in idx:
                if not keep_c or np.all(_iou(boxes_a[j], boxes_a[keep_c]) <= nms_threshold):
                    keep_c.append(int(j))
            kept.extend(keep_c)
        kept.sort(key=lambda j: -scores_a[j])
        for j in kept[:keep_top_k]:
            rows.append([b, labels_a[j], scores_a[j], *boxes_a[j]])
    out = np.full((n * keep_top_k, 7), -1.0, dtype=feats[0].dtype)
    if rows:
        out[: len(rows)] = np.asarray(rows, dtype=out.dtype)
    return out.reshape(1, 1, n * keep_top_k, 7)


def _shape(ctx: ob.ShapeContext) -> Any:
    heads = ctx.num_inputs
    if heads != len(ctx.attr("anchors_scale")) or len(ctx.attr("mask")) % heads:
        raise ctx.error(f"{heads} heads need as many anchors_scale values and a mask per head",
                        attr="anchors_scale")
    per_head = len(ctx.attr("mask")) // heads
    for i in range(heads):
        c = ctx.input_shape(i)[1]
        if c != per_head * (5 + ctx.attr("num_classes")):
            raise ctx.error(f"head {i} has {c} channels, expected {per_head} x (5 + num_classes)")
    n = ctx.input_shape(0)[0]
    return (1, 1, n * ctx.attr("keep_top_k"), 7), ctx.input_dtype(0)


(
    ob.define_op("Yolov3DetectionOutput")
    .doc("YOLOv3 post-processing: decode the heads (darknet), per-class NMS, top keep_top_k.")
    .input("heads", "T", variadic=True).output("detections", "T")
    .param("num_classes", "int", default=80, minimum=1)
    .param("confidence_threshold", "float", default=0.5, minimum=0.0, maximum=1.0)
    .param("nms_threshold", "float", default=0.45, minimum=0.0, maximum=1.0)
    .param("keep_top_k", "int", default=200, minimum=1)
    .param("biases", "floats", default=COCO_BIASES)
    .param("mask", "ints", default=(6, 7, 8, 3, 4, 5, 0, 1, 2))
    .param("anchors_scale", "ints", default=(32, 16, 8))
    .type_param("T", ("f32",))
    .shape_fn(_shape)
    .compute(yolov3_detect)
)

_PARAMS = ("num_classes", "confidence_threshold", "nms_threshold", "keep_top_k", "biases", "mask",
           "anchors_scale")


_REPEATED = ("biases", "mask", "anchors_scale")


def parse_yolov3_detect(src: ob.OriginNode, dst: Any) -> None:
    """Copy the layer's parameters. The block is not in caffe.proto, so it is read without a
    schema: ``get_list`` gives a repeated field as a list even when it is written once."""
    for name in _PARAMS:
        if src.has_attr(name):
            dst.set_attr(name, src.get_list(name) if name in _REPEATED else src.get_attr(name))


# opbridge maps the fork's Yolov3DetectionOutput itself (class-agnostic NMS, as the
# MobileNet-YOLO fork); override=True is how a plugin replaces a built-in mapping with its own.
(
    ob.register_custom_op("Yolov3DetectionOutput", override=True)
    .framework_type(ob.Framework.CAFFE)
    .origin_op_type("Yolov3DetectionOutput", "TPUYolov3DetectOut")
    .parse_params_by_operator_fn(parse_yolov3_detect)
    .imply_type(ob.ImplyType.CPU)
)
