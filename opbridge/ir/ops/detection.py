"""Detection ops from the Caffe forks: SSD's DetectionOutput (box decoding + per-class NMS, a
host op) and Faster R-CNN's ROIPooling. PriorBox needs no op: its boxes depend only on shapes,
so the mapping emits them as a constant."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op
from .common import FLOATS

CODE_TYPES = ("CORNER", "CENTER_SIZE", "CORNER_SIZE")


def detection_rows(ctx_or_attrs: Any, n: int, num_priors: int) -> int:
    """Rows of DetectionOutput's static output: the most detections that can be kept."""
    get = ctx_or_attrs.attr if isinstance(ctx_or_attrs, ShapeContext) else ctx_or_attrs.__getitem__
    classes = int(get("num_classes")) - (1 if int(get("background_label_id")) >= 0 else 0)
    per_class = int(get("top_k")) if int(get("top_k")) > 0 else num_priors
    per_image = max(1, classes) * min(per_class, num_priors)
    keep = int(get("keep_top_k"))
    if keep > 0:
        per_image = min(per_image, keep)
    return n * per_image


def _det_shape(ctx: ShapeContext) -> Any:
    n, prior_len = ctx.input_shape(0)[0], ctx.input_shape(2)[-1]
    if not isinstance(n, int) or not isinstance(prior_len, int):
        raise ctx.error("needs static batch and prior shapes (its output size depends on them)",
                        hint="give the input a fixed shape with --input-shape")
    return (1, 1, detection_rows(ctx, n, prior_len // 4), 7), ctx.input_dtype(0)


def decode_boxes(loc: np.ndarray, prior: np.ndarray, var: np.ndarray, code_type: str,
                 variance_encoded_in_target: bool) -> np.ndarray:
    """SSD's DecodeBBoxes for one image: loc (P, 4), prior (P, 4), var (P, 4) -> (P, 4)."""
    v = np.ones_like(var) if variance_encoded_in_target else var
    pw, ph = prior[:, 2] - prior[:, 0], prior[:, 3] - prior[:, 1]
    if code_type == "CORNER":
        return prior + v * loc
    if code_type == "CORNER_SIZE":
        size = np.stack([pw, ph, pw, ph], axis=1)
        return prior + v * loc * size
    cx, cy = (prior[:, 0] + prior[:, 2]) / 2, (prior[:, 1] + prior[:, 3]) / 2
    dcx = v[:, 0] * loc[:, 0] * pw + cx
    dcy = v[:, 1] * loc[:, 1] * ph + cy
    dw = np.exp(v[:, 2] * loc[:, 2]) * pw
    dh = np.exp(v[:, 3] * loc[:, 3]) * ph
    return np.stack([dcx - dw / 2, dcy - dh / 2, dcx + dw / 2, dcy + dh / 2], axis=1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """SSD's JaccardOverlap of normalised boxes (no +1), 0 where they do not intersect."""
    ix1 = np.maximum(box[0], others[:, 0])
    iy1 = np.maximum(box[1], others[:, 1])
    ix2 = np.minimum(box[2], others[:, 2])
    iy2 = np.minimum(box[3], others[:, 3])
    inter = np.where((ix2 > ix1) & (iy2 > iy1), (ix2 - ix1) * (iy2 - iy1), 0.0)

    def area(b: np.ndarray) -> np.ndarray:
        w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
        return np.where((w < 0) | (h < 0), 0.0, w * h)

    union = area(box) + area(others) - inter
    return np.where(inter > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def nms(boxes: np.ndarray, scores: np.ndarray, score_threshold: float, nms_threshold: float,
        eta: float, top_k: int) -> list[int]:
    """SSD's ApplyNMSFast: candidates above the threshold by descending score (at most top_k),
    kept unless they overlap a kept box by more than the (adaptive) threshold."""
    cand = np.nonzero(scores > score_threshold)[0]
    order = cand[np.argsort(-scores[cand], kind="stable")]
    if top_k > -1:
        order = order[:top_k]
    kept: list[int] = []
    thr = nms_threshold
    for i in order:
        if kept and np.any(_iou(boxes[i], boxes[kept]) > thr):
            continue
        kept.append(int(i))
        if eta < 1 and thr > 0.5:
            thr *= eta
    return kept


def detection_output(loc: np.ndarray, conf: np.ndarray, prior: np.ndarray, **a: Any) -> np.ndarray:
    n = loc.shape[0]
    num_priors = prior.shape[2] // 4
    nc = int(a["num_classes"])
    bg = int(a["background_label_id"])
    share = bool(a["share_location"])
    loc_classes = 1 if share else nc
    pboxes = prior[0, 0].reshape(num_priors, 4)
    pvar = prior[0, 1].reshape(num_priors, 4) if prior.shape[1] > 1 else np.full((num_priors, 4), 0.1)
    rows: list[list[float]] = []
    for i in range(n):
        l_all = loc[i].reshape(num_priors, loc_classes, 4)
        scores = conf[i].reshape(num_priors, nc)
        decoded = [decode_boxes(l_all[:, c], pboxes, pvar, a["code_type"],
                                bool(a["variance_encoded_in_target"])) for c in range(loc_classes)]
        picked: dict[int, list[int]] = {}
        for c in range(nc):
            if c == bg:
                continue
            boxes = decoded[0 if share else c]
            picked[c] = nms(boxes, scores[:, c], float(a["confidence_threshold"]),
                            float(a["nms_threshold"]), float(a["eta"]), int(a["top_k"]))
        total = sum(len(v) for v in picked.values())
        keep = int(a["keep_top_k"])
        if keep > -1 and total > keep:
            pairs = [(scores[j, c], c, j) for c, idx in picked.items() for j in idx]
            pairs.sort(key=lambda t: -t[0])
            picked = {}
            for _, c, j in pairs[:keep]:
                picked.setdefault(c, []).append(j)
        for c in sorted(picked):
            boxes = decoded[0 if share else c]
            for j in picked[c]:
                rows.append([float(i), float(c), float(scores[j, c]), *map(float, boxes[j])])
    total_rows = detection_rows(a, n, num_priors)
    out = np.full((total_rows, 7), -1.0, dtype=loc.dtype)
    if rows:
        out[: len(rows)] = np.asarray(rows[:total_rows], dtype=loc.dtype)
    else:  # Caffe's "no detections" result: one row [image, -1, ...] per image
        out[:n, 0] = np.arange(n)
    return out.reshape(1, 1, total_rows, 7)


(
    define_op("DetectionOutput")
    .doc("SSD's detection output: decode loc against the priors, per-class NMS, keep_top_k. "
         "Output (1, 1, K, 7) rows [image, label, score, xmin, ymin, xmax, ymax]; K is the most "
         "detections that can be kept, rows past the detections found are all -1 (with none "
         "found, the first rows are [image, -1, ...] per image, as Caffe writes them).")
    .input("loc", "T").input("conf", "T").input("prior", "T").output("detections", "T")
    .param("num_classes", "int", minimum=1)
    .param("share_location", "bool", default=True)
    .param("background_label_id", "int", default=0)
    .param("nms_threshold", "float", default=0.3, minimum=0.0)
    .param("top_k", "int", default=-1)
    .param("eta", "float", default=1.0, minimum=0.0)
    .param("keep_top_k", "int", default=-1)
    .param("confidence_threshold", "float", default=-np.inf)
    .param("code_type", "str", default="CORNER", allowed=CODE_TYPES)
    .param("variance_encoded_in_target", "bool", default=False)
    .type_param("T", FLOATS)
    .shape_fn(_det_shape)
    .compute(detection_output)
    .placement("cpu")  # post-processing (sorting, NMS) runs on the host, as vendor toolchains do
)


def _c_round(v: np.ndarray) -> np.ndarray:
    """C's round(): halves away from zero (numpy rounds them to even)."""
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def roi_pooling(x: np.ndarray, rois: np.ndarray, *, pooled_h: int, pooled_w: int,
                spatial_scale: float) -> np.ndarray:
    """py-faster-rcnn's ROIPoolingLayer::Forward_cpu: max over integer bins of each roi."""
    n, c, h, w = x.shape
    r = rois.reshape(-1, 5)
    out = np.zeros((r.shape[0], c, pooled_h, pooled_w), dtype=x.dtype)
    for k, roi in enumerate(r):
        b = int(roi[0])
        if not 0 <= b < n:
            continue
        x1, y1, x2, y2 = (int(v) for v in _c_round(roi[1:5] * spatial_scale))
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        bh, bw = rh / pooled_h, rw / pooled_w
        for ph in range(pooled_h):
            hs = min(max(int(np.floor(ph * bh)) + y1, 0), h)
            he = min(max(int(np.ceil((ph + 1) * bh)) + y1, 0), h)
            for pw in range(pooled_w):
                ws = min(max(int(np.floor(pw * bw)) + x1, 0), w)
                we = min(max(int(np.ceil((pw + 1) * bw)) + x1, 0), w)
                if he > hs and we > ws:
                    out[k, :, ph, pw] = x[b, :, hs:he, ws:we].max(axis=(1, 2))
    return out


def _roi_shape(ctx: ShapeContext) -> Any:
    xs, rs = ctx.input_shape(0), ctx.input_shape(1)
    if len(xs) != 4 or len(rs) < 2 or rs[-1] != 5:
        raise ctx.error(f"needs x (N, C, H, W) and rois (R, 5); got {list(xs)} and {list(rs)}",
                        hint="check the input's shape (--input-shape) and the rois' shape")
    return (rs[0], xs[1], ctx.attr("pooled_h"), ctx.attr("pooled_w")), ctx.input_dtype(0)


(
    define_op("ROIPooling")
    .doc("Faster R-CNN's ROI max pooling: rois rows [batch, x1, y1, x2, y2] in image pixels, "
         "scaled by spatial_scale and rounded, cut into pooled_h x pooled_w integer bins.")
    .input("x", "T").input("rois", "T").output("y", "T")
    .param("pooled_h", "int", minimum=1).param("pooled_w", "int", minimum=1)
    .param("spatial_scale", "float", default=1.0, minimum=0.0)
    .type_param("T", FLOATS)
    .shape_fn(_roi_shape)
    .compute(roi_pooling)
)
