"""Region-based detection ops of the Caffe forks: R-FCN's position-sensitive ROI pooling
(daijifeng001/caffe-rfcn psroi_pooling_layer.cu) and the C++ ``Proposal`` layer that ports
py-faster-rcnn's rpn/proposal_layer.py (anchors, box deltas, clipping, min size, top-N, NMS)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op
from .common import FLOATS


def _c_round(v: float) -> float:
    """C's round(): halves away from zero."""
    return float(np.sign(v) * np.floor(abs(v) + 0.5))


def psroi_pooling(x: np.ndarray, rois: np.ndarray, *, output_dim: int, group_size: int,
                  spatial_scale: float) -> np.ndarray:
    """Average of bin (ph, pw) of each roi over input channel (c * G + ph) * G + pw."""
    n, _, h, w = x.shape
    r = rois.reshape(-1, 5)
    g = group_size
    out = np.zeros((r.shape[0], output_dim, g, g), dtype=x.dtype)
    for k, roi in enumerate(r):
        b = int(roi[0])
        if not 0 <= b < n:
            continue
        x1 = _c_round(float(roi[1])) * spatial_scale
        y1 = _c_round(float(roi[2])) * spatial_scale
        x2 = (_c_round(float(roi[3])) + 1.0) * spatial_scale
        y2 = (_c_round(float(roi[4])) + 1.0) * spatial_scale
        bh, bw = max(y2 - y1, 0.1) / g, max(x2 - x1, 0.1) / g
        for ph in range(g):
            hs = min(max(int(np.floor(ph * bh + y1)), 0), h)
            he = min(max(int(np.ceil((ph + 1) * bh + y1)), 0), h)
            for pw in range(g):
                ws = min(max(int(np.floor(pw * bw + x1)), 0), w)
                we = min(max(int(np.ceil((pw + 1) * bw + x1)), 0), w)
                if he <= hs or we <= ws:
                    continue
                chans = (np.arange(output_dim) * g + ph) * g + pw
                out[k, :, ph, pw] = x[b, chans, hs:he, ws:we].mean(axis=(1, 2))
    return out


def _psroi_shape(ctx: ShapeContext) -> Any:
    xs, rs = ctx.input_shape(0), ctx.input_shape(1)
    g, d = ctx.attr("group_size"), ctx.attr("output_dim")
    if len(xs) != 4 or len(rs) < 2 or rs[-1] != 5:
        raise ctx.error(f"needs x (N, C, H, W) and rois (R, 5); got {list(xs)} and {list(rs)}",
                        hint="check the input's shape (--input-shape) and the rois' shape")
    if xs[1] != d * g * g:
        raise ctx.error(f"x has {xs[1]} channels, expected output_dim * group_size^2 = {d * g * g}",
                        attr="output_dim",
                        hint="check the layer's output_dim and group_size params against its input's "
                             "channels")
    return (rs[0], d, g, g), ctx.input_dtype(0)


(
    define_op("PSROIPooling")
    .doc("R-FCN's position-sensitive ROI average pooling: rois [batch, x1, y1, x2, y2] in image "
         "pixels (rounded, end + 1, times spatial_scale) cut into group_size^2 bins; bin (i, j) "
         "of output channel c averages input channel (c * group_size + i) * group_size + j.")
    .input("x", "T").input("rois", "T").output("y", "T")
    .param("output_dim", "int", minimum=1).param("group_size", "int", minimum=1)
    .param("spatial_scale", "float", default=1.0, minimum=0.0)
    .type_param("T", FLOATS)
    .shape_fn(_psroi_shape)
    .compute(psroi_pooling)
)


def rpn_anchors(base_size: int, ratios: Any, scales: Any) -> np.ndarray:
    """py-faster-rcnn generate_anchors: ratio then scale enumeration around one base box."""
    w = h = float(base_size)
    cx, cy = (w - 1) / 2, (h - 1) / 2
    out = []
    for r in ratios:
        ws = np.round(np.sqrt(w * h / r))
        hs = np.round(ws * r)
        for s in scales:
            aw, ah = ws * s, hs * s
            out.append([cx - (aw - 1) / 2, cy - (ah - 1) / 2, cx + (aw - 1) / 2, cy + (ah - 1) / 2])
    return np.array(out, dtype=np.float64)


def _greedy_nms(boxes: np.ndarray, thresh: float) -> list[int]:
    """Greedy NMS (boxes sorted by score) with pixel (+1) areas, as py-faster-rcnn's py_cpu_nms."""
    x1, y1, x2, y2 = boxes.T
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = np.arange(len(boxes))
    keep: list[int] = []
    while order.size:
        i = order[0]
        keep.append(int(i))
        iw = np.maximum(0.0, np.minimum(x2[i], x2[order[1:]]) - np.maximum(x1[i], x1[order[1:]]) + 1)
        ih = np.maximum(0.0, np.minimum(y2[i], y2[order[1:]]) - np.maximum(y1[i], y1[order[1:]]) + 1)
        inter = iw * ih
        order = order[1:][inter / (areas[i] + areas[order[1:]] - inter) <= thresh]
    return keep


def proposal(scores: np.ndarray, deltas: np.ndarray, im_info: np.ndarray, *, feat_stride: int,
             base_size: int, min_size: int, ratios: Any, scales: Any, pre_nms_topn: int,
             post_nms_topn: int, nms_thresh: float) -> tuple[np.ndarray, np.ndarray]:
    """Image 0's proposals: rois (post_nms_topn, 5) [0, x1, y1, x2, y2] and their scores
    (post_nms_topn, 1); rows past the proposals kept are zero."""
    anchors = rpn_anchors(base_size, ratios, scales)
    a = anchors.shape[0]
    h, w = scores.shape[2:]
    sx, sy = np.meshgrid(np.arange(w) * feat_stride, np.arange(h) * feat_stride)
    shifts = np.stack([sx.ravel(), sy.ravel(), sx.ravel(), sy.ravel()], axis=1)
    boxes = (anchors[None] + shifts[:, None]).reshape(-1, 4)
    d = deltas[0].astype(np.float64).transpose(1, 2, 0).reshape(-1, 4)
    fg = scores[0, a:].astype(np.float64).transpose(1, 2, 0).reshape(-1)
    bw, bh = boxes[:, 2] - boxes[:, 0] + 1.0, boxes[:, 3] - boxes[:, 1] + 1.0
    cx, cy = boxes[:, 0] + 0.5 * bw, boxes[:, 1] + 0.5 * bh
    pcx, pcy = d[:, 0] * bw + cx, d[:, 1] * bh + cy
    pw, ph = np.exp(d[:, 2]) * bw, np.exp(d[:, 3]) * bh
    img_h, img_w, img_scale = (float(v) for v in im_info.reshape(-1)[:3])
    props = np.stack([pcx - 0.5 * pw, pcy - 0.5 * ph, pcx + 0.5 * pw, pcy + 0.5 * ph], axis=1)
    props[:, 0::2] = np.clip(props[:, 0::2], 0, img_w - 1)
    props[:, 1::2] = np.clip(props[:, 1::2], 0, img_h - 1)
    ms = min_size * img_scale
    keep = np.nonzero((props[:, 2] - props[:, 0] + 1 >= ms) & (props[:, 3] - props[:, 1] + 1 >= ms))[0]
    props, fg = props[keep], fg[keep]
    order = np.argsort(-fg, kind="stable")
    if pre_nms_topn > 0:
        order = order[:pre_nms_topn]
    props, fg = props[order], fg[order]
    kept = _greedy_nms(props, nms_thresh)[:post_nms_topn]
    rois = np.zeros((post_nms_topn, 5), scores.dtype)
    out_scores = np.zeros((post_nms_topn, 1), scores.dtype)
    rois[: len(kept), 1:] = props[kept]
    out_scores[: len(kept), 0] = fg[kept]
    return rois, out_scores


def _proposal_shape(ctx: ShapeContext) -> Any:
    s, d = ctx.input_shape(0), ctx.input_shape(1)
    a = len(ctx.attr("ratios")) * len(ctx.attr("scales"))
    if len(s) != 4 or s[1] != 2 * a or len(d) != 4 or d[1] != 4 * a or tuple(s[2:]) != tuple(d[2:]):
        raise ctx.error(f"needs scores (1, {2 * a}, H, W) and deltas (1, {4 * a}, H, W) for {a} anchors; "
                        f"got {list(s)} and {list(d)}",
                        hint="check the layer's anchors against its inputs' channels")
    k = ctx.attr("post_nms_topn")
    dt = ctx.input_dtype(0)
    return [((k, 5), dt), ((k, 1), dt)]


(
    define_op("Proposal")
    .doc("Faster R-CNN's region proposals (the C++ port of py-faster-rcnn's proposal layer): "
         "anchors shifted over the feature map, decoded by the deltas, clipped to im_info's "
         "image, small boxes dropped, the pre_nms_topn best, NMS, the post_nms_topn kept as "
         "rois [0, x1, y1, x2, y2] with their scores; unused rows zero.")
    .input("scores", "T").input("deltas", "T").input("im_info", "T")
    .output("rois", "T").output("roi_scores", "T")
    .param("feat_stride", "int", default=16, minimum=1)
    .param("base_size", "int", default=16, minimum=1)
    .param("min_size", "int", default=16, minimum=0)
    .param("ratios", "floats", default=(0.5, 1.0, 2.0))
    .param("scales", "floats", default=(8.0, 16.0, 32.0))
    .param("pre_nms_topn", "int", default=6000)
    .param("post_nms_topn", "int", default=300, minimum=1)
    .param("nms_thresh", "float", default=0.7, minimum=0.0)
    .type_param("T", FLOATS)
    .shape_fn(_proposal_shape)
    .compute(proposal)
    .placement("cpu")  # sorting and NMS run on the host
)
