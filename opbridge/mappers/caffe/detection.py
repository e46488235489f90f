"""Caffe detection layers: SSD's PriorBox (a constant) and DetectionOutput (on the host),
Faster R-CNN's ROIPooling."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..registry import mapping
from .common import Params, check_constant_size

CAFFE = Framework.CAFFE


def aspect_ratios(p: Params) -> list[float]:
    """1, then each aspect_ratio not seen yet (and its inverse with flip), as SSD builds them."""
    ars = [1.0]
    for ar in p.floats("aspect_ratio"):
        if not ar > 0:
            raise p.error("aspect_ratio", ar, "must be > 0")
        if any(abs(ar - a) < 1e-6 for a in ars):
            continue
        ars.append(ar)
        if p.get("flip"):
            ars.append(1.0 / ar)
    return ars


def num_priors(node: OriginNode) -> int:
    """Boxes per feature-map cell."""
    p = Params(node, "prior_box_param")
    return len(aspect_ratios(p)) * len(p.floats("min_size")) + len(p.floats("max_size"))


def prior_boxes(node: OriginNode, feat_hw: tuple[int, int], img_hw: tuple[int, int]) -> np.ndarray:
    """SSD PriorBoxLayer::Forward_cpu: (1, 2, H * W * priors * 4) boxes and variances."""
    p = Params(node, "prior_box_param")
    mins, maxs = p.floats("min_size"), p.floats("max_size")
    if not mins or any(m <= 0 for m in mins):
        raise p.error("min_size", mins, "required, > 0")
    if maxs and (len(maxs) != len(mins) or any(mx <= mn for mn, mx in zip(mins, maxs))):
        raise p.error("max_size", maxs, "one per min_size, each larger than it")
    ars = aspect_ratios(p)
    fh, fw = feat_hw
    if p.has("img_h") or p.has("img_w"):
        img_h, img_w = float(p.get("img_h")), float(p.get("img_w"))
    elif p.has("img_size"):
        img_h = img_w = float(p.get("img_size"))
    else:
        img_h, img_w = float(img_hw[0]), float(img_hw[1])
    if p.has("step_h") or p.has("step_w"):
        step_h, step_w = float(p.get("step_h")), float(p.get("step_w"))
    elif p.has("step"):
        step_h = step_w = float(p.get("step"))
    else:
        step_h, step_w = img_h / fh, img_w / fw
    offset = float(p.get("offset"))
    sizes: list[tuple[float, float]] = []
    for s, mn in enumerate(mins):
        sizes.append((mn, mn))
        if maxs:
            m = float(np.sqrt(mn * maxs[s]))
            sizes.append((m, m))
        for ar in ars:
            if abs(ar - 1.0) < 1e-6:
                continue
            sizes.append((mn * float(np.sqrt(ar)), mn / float(np.sqrt(ar))))
    check_constant_size(node, 2 * fh * fw * len(sizes) * 4, "prior boxes")
    bw = np.array([s[0] for s in sizes], np.float32)
    bh = np.array([s[1] for s in sizes], np.float32)
    cy, cx = np.meshgrid((np.arange(fh) + offset) * step_h, (np.arange(fw) + offset) * step_w,
                         indexing="ij")
    cx, cy = cx[..., None], cy[..., None]
    boxes = np.stack([(cx - bw / 2) / img_w, (cy - bh / 2) / img_h,
                      (cx + bw / 2) / img_w, (cy + bh / 2) / img_h], axis=-1).astype(np.float32)
    if p.get("clip"):
        boxes = np.clip(boxes, 0.0, 1.0)
    var = p.floats("variance") or [0.1]
    if len(var) not in (1, 4):
        raise p.error("variance", var, "give 1 or 4 values")
    variances = np.broadcast_to(np.asarray(var * (4 // len(var)), np.float32), boxes.shape)
    return np.stack([boxes.ravel(), variances.ravel()])[None].astype(np.float32)


@mapping(CAFFE, "PriorBox")
def prior_box(node: OriginNode, g: Any) -> Value:
    """The prior boxes of a feature map (bottom 0) for an image (bottom 1): they depend only
    on the two shapes, so they are a constant."""
    x, img = g.input(0), g.input(1)
    if img is None:
        raise g.error("takes 2 bottoms (the feature map and the image)")
    return g.constant(prior_boxes(node, (int(x.shape[2]), int(x.shape[3])),
                                  (int(img.shape[2]), int(img.shape[3]))))


@mapping(CAFFE, "DetectionOutput")
def detection_output(node: OriginNode, g: Any) -> Value:
    """SSD's post-processing, run on the host (the DetectionOutput op is placed on the cpu)."""
    p = Params(node, "detection_output_param")
    if not p.has("num_classes"):
        raise p.error("num_classes", None, "required")
    nms = node.attrs.get("nms_param", {}) if isinstance(node.attrs.get("nms_param"), dict) else {}
    attrs = dict(
        num_classes=int(p.get("num_classes")), share_location=bool(p.get("share_location")),
        background_label_id=int(p.get("background_label_id")),
        nms_threshold=float(nms.get("nms_threshold", 0.3)), top_k=int(nms.get("top_k", -1)),
        eta=float(nms.get("eta", 1.0)), keep_top_k=int(p.get("keep_top_k")),
        confidence_threshold=float(p.get("confidence_threshold", -np.inf)),
        code_type=p.get("code_type"),
        variance_encoded_in_target=bool(p.get("variance_encoded_in_target")),
    )
    if g.num_inputs != 3:
        raise g.error(f"takes 3 bottoms (loc, conf, priors), got {g.num_inputs}")
    return g.op("DetectionOutput", g.inputs(), **attrs)


@mapping(CAFFE, "ROIPooling")
def roi_pooling(node: OriginNode, g: Any) -> Value:
    p = Params(node, "roi_pooling_param")
    ph, pw = int(p.get("pooled_h")), int(p.get("pooled_w"))
    if ph < 1 or pw < 1:
        raise p.error("pooled_h", (ph, pw), "pooled_h and pooled_w must be >= 1")
    return g.op("ROIPooling", [g.input(0), g.input(1)], pooled_h=ph, pooled_w=pw,
                spatial_scale=float(p.get("spatial_scale")))
