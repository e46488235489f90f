"""Faster R-CNN's ``Python`` ProposalLayer as an opbridge plugin (``--plugin frcnn_proposal.py``).

py-faster-rcnn's test net generates its region proposals in a Python layer
(``python_param { module: 'rpn.proposal_layer' layer: 'ProposalLayer' param_str: "'feat_stride': 16" }``).
Caffe runs it by importing that module; opbridge never runs model code, so this file gives
the layer the three registrations of any custom op:

1. the op definition, ``FrcnnProposal``: inputs, parameters, a shape function, and a numpy
   compute (the reference semantics, run on the host);
2. the mapping from the Caffe layer: ``param_str`` decoded (as a Python literal, never eval'ed)
   onto the op's parameters;
3. where it runs: ``.placement("cpu")`` on the op definition (post-processing on the host, as
   the vendor toolchains do).

The rois output has a static shape (post_nms_top_n, 5); rows past the proposals kept are zero.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

import opbridge as ob
from opbridge.mappers import Framework, mapping


def generate_anchors(base_size: int = 16, ratios: tuple[float, ...] = (0.5, 1.0, 2.0),
                     scales: tuple[float, ...] = (8.0, 16.0, 32.0)) -> np.ndarray:
    """py-faster-rcnn's anchors: (len(ratios) * len(scales), 4) boxes around one cell."""
    w = h = float(base_size)
    cx, cy = (w - 1) / 2, (h - 1) / 2
    out = []
    for r in ratios:
        ws = np.round(np.sqrt(w * h / r))
        hs = np.round(ws * r)
        for s in scales:
            aw, ah = ws * s, hs * s
            out.append([cx - (aw - 1) / 2, cy - (ah - 1) / 2, cx + (aw - 1) / 2, cy + (ah - 1) / 2])
    return np.array(out, dtype=np.float32)


def nms(dets: np.ndarray, thresh: float) -> list[int]:
    """Greedy NMS on (n, 5) [x1, y1, x2, y2, score] with pixel (+1) areas, as py-faster-rcnn."""
    x1, y1, x2, y2, scores = dets.T
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = scores.argsort()[::-1]
    keep: list[int] = []
    while order.size:
        i = order[0]
        keep.append(int(i))
        xx1 = np.maximum(x1[i], x1[order[1:]])
        yy1 = np.maximum(y1[i], y1[order[1:]])
        xx2 = np.minimum(x2[i], x2[order[1:]])
        yy2 = np.minimum(y2[i], y2[order[1:]])
        inter = np.maximum(0.0, xx2 - xx1 + 1) * np.maximum(0.0, yy2 - yy1 + 1)
        ovr = inter / (areas[i] + areas[order[1:]] - inter)
        order = order[1:][ovr <= thresh]
    return keep


def proposal(cls_prob: np.ndarray, bbox_pred: np.ndarray, im_info: np.ndarray, *, feat_stride: int,
             scales: tuple[float, ...], ratios: tuple[float, ...], pre_nms_top_n: int,
             post_nms_top_n: int, nms_thresh: float, min_size: int) -> np.ndarray:
    """ProposalLayer.forward (TEST settings): anchors + deltas, clip, filter, top-N, NMS."""
    anchors = generate_anchors(ratios=ratios, scales=scales)
    a = anchors.shape[0]
    scores = cls_prob[:1, a:, :, :]
    h, w = scores.shape[-2:]
    sx, sy = np.meshgrid(np.arange(w) * feat_stride, np.arange(h) * feat_stride)
    shifts = np.stack([sx.ravel(), sy.ravel(), sx.ravel(), sy.ravel()], axis=1).astype(np.float32)
    all_anchors = (anchors[None] + shifts[:, None]).reshape(-1, 4)
    deltas = bbox_pred[:1].transpose(0, 2, 3, 1).reshape(-1, 4)
    scores = scores.transpose(0, 2, 3, 1).reshape(-1)
    widths = all_anchors[:, 2] - all_anchors[:, 0] + 1.0
    heights = all_anchors[:, 3] - all_anchors[:, 1] + 1.0
    cx = all_anchors[:, 0] + 0.5 * widths
    cy = all_anchors[:, 1] + 0.5 * heights
    pcx, pcy = deltas[:, 0] * widths + cx, deltas[:, 1] * heights + cy
    pw, ph = np.exp(deltas[:, 2]) * widths, np.exp(deltas[:, 3]) * heights
    boxes = np.stack([pcx - 0.5 * pw, pcy - 0.5 * ph, pcx + 0.5 * pw, pcy + 0.5 * ph], axis=1)
    im_h, im_w, im_scale = (float(v) for v in im_info.reshape(-1)[:3])
    boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0, im_w - 1)
    boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0, im_h - 1)
    ms = min_size * im_scale
    keep = np.nonzero((boxes[:, 2] - boxes[:, 0] + 1 >= ms) & (boxes[:, 3] - boxes[:, 1] + 1 >= ms))[0]
    boxes, scores = boxes[keep], scores[keep]
    order = scores.argsort(kind="stable")[::-1][:pre_nms_top_n]
    boxes, scores = boxes[order], scores[order]
    kept = nms(np.hstack([boxes, scores[:, None]]), nms_thresh)[:post_nms_top_n]
    rois = np.zeros((post_nms_top_n, 5), dtype=cls_prob.dtype)
    rois[: len(kept), 1:] = boxes[kept]
    return rois


(
    ob.define_op("FrcnnProposal")
    .doc("py-faster-rcnn's RPN proposal layer (TEST settings); rois (post_nms_top_n, 5).")
    .input("cls_prob", "T").input("bbox_pred", "T").input("im_info", "T").output("rois", "T")
    .param("feat_stride", "int", default=16, minimum=1)
    .param("scales", "floats", default=(8.0, 16.0, 32.0))
    .param("ratios", "floats", default=(0.5, 1.0, 2.0))
    .param("pre_nms_top_n", "int", default=6000, minimum=1)
    .param("post_nms_top_n", "int", default=300, minimum=1)
    .param("nms_thresh", "float", default=0.7, minimum=0.0, maximum=1.0)
    .param("min_size", "int", default=16, minimum=0)
    .type_param("T", ("f32",))
    .shape_fn(lambda ctx: ((ctx.attr("post_nms_top_n"), 5), ctx.input_dtype(0)))
    .compute(proposal)
    .placement("cpu")
)


def decode_param_str(text: str) -> dict[str, Any]:
    """py-faster-rcnn's param_str (YAML-ish ``'feat_stride': 16``) as a dict, via literal_eval."""
    body = text.strip()
    if not body:
        return {}
    try:
        value = ast.literal_eval(body if body.startswith("{") else "{" + body + "}")
    except (ValueError, SyntaxError) as err:
        raise ob.AttrError(f"python_param.param_str = {text!r}: not a dict literal ({err})") from None
    if not isinstance(value, dict):
        raise ob.AttrError(f"python_param.param_str = {text!r}: not a dict")
    return value


@mapping(Framework.CAFFE, "Python")
def python_layer(node: ob.OriginNode, g: Any) -> Any:
    """Map the Python layers this plugin knows (the RPN ProposalLayer); others stay errors."""
    layer = node.get_attr("layer", "")
    if layer != "ProposalLayer":
        raise g.unsupported(
            f"Python layer class '{node.get_attr('module', '?')}.{layer}' is not known to this plugin",
            hint="register a mapping for it in your own plugin",
        )
    params = decode_param_str(node.get_attr("param_str", ""))
    attrs: dict[str, Any] = {"feat_stride": int(params.get("feat_stride", 16))}
    if "scales" in params:
        attrs["scales"] = tuple(float(s) for s in params["scales"])
    return g.op("FrcnnProposal", g.inputs(), **attrs)
