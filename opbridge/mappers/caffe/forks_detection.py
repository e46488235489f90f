"""Detection layers of the Caffe forks: MobileNet-YOLO's ``YoloDetectionOutput`` (v2) and
``Yolov3DetectionOutput`` (v3), R-FCN's ``PSROIPooling``, the Mask R-CNN / Detectron forks'
``ROIAlign`` and the C++ ``Proposal`` layer of the Faster R-CNN forks."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..registry import mapping
from .common import Params

CAFFE = Framework.CAFFE


def _yolo_common(p: Params) -> dict[str, Any]:
    return dict(num_classes=int(p.get("num_classes", 20)), confidence_threshold=float(p.get("confidence_threshold", 0.01)),
                nms_threshold=float(p.get("nms_threshold", 0.45)), biases=tuple(p.floats("biases")),
                keep_top_k=int(p.get("keep_top_k", 200)))


@mapping(CAFFE, "YoloDetectionOutput")
def yolo_detection_output(node: OriginNode, g: Any) -> Value:
    """YOLOv2's output layer (eric612/MobileNet-YOLO yolo_detection_output_layer.cpp): boxes of
    num_box anchors (biases in grid cells) per cell, softmax classes, one or two heads. The
    fork's output has as many rows as detections; here keep_top_k (200 unless set) per image."""
    p = Params(node, "yolo_detection_output_param")
    attrs = _yolo_common(p)
    if not attrs["biases"]:
        raise p.error("biases", None, "required: 2 per box (anchor width, height in grid cells)")
    return g.op("YoloDetectionOutput", g.inputs(), version=2, num_box=int(p.get("num_box", 5)), **attrs)


@mapping(CAFFE, "Yolov3DetectionOutput")
def yolov3_detection_output(node: OriginNode, g: Any) -> Value:
    """YOLOv3's output layer (eric612/MobileNet-YOLO yolov3_detection_output_layer.cpp): one
    bottom per head, anchors picked by ``mask`` (num_box per head), sized by ``anchors_scale``
    (the head's stride), sigmoid class scores times objectness, every class above the
    threshold. Rows per image as for YoloDetectionOutput."""
    p = Params(node, "yolov3_detection_output_param")
    attrs = _yolo_common(p)
    nb = int(p.get("num_box", 3))
    mask, scales = p.ints("mask"), p.ints("anchors_scale")
    if not attrs["biases"] or not mask or not scales:
        raise p.error("biases" if not attrs["biases"] else "mask" if not mask else "anchors_scale", None,
                      "biases, mask and anchors_scale are required")
    return g.op("YoloDetectionOutput", g.inputs(), version=3, num_box=nb, mask=tuple(mask),
                anchors_scale=tuple(scales), **attrs)


@mapping(CAFFE, "PSROIPooling")
def psroi_pooling(node: OriginNode, g: Any) -> Value:
    """R-FCN (daijifeng001/caffe-rfcn): psroi_pooling_param output_dim, group_size, spatial_scale."""
    p = Params(node, "psroi_pooling_param")
    for f in ("output_dim", "group_size"):
        if not p.has(f) or int(p.get(f)) < 1:
            raise p.error(f, p.get(f, None), "required, >= 1")
    if g.num_inputs != 2:
        raise g.error(f"takes 2 bottoms (features, rois), got {g.num_inputs}")
    return g.op("PSROIPooling", [g.input(0), g.input(1)], output_dim=int(p.get("output_dim")),
                group_size=int(p.get("group_size")), spatial_scale=float(p.get("spatial_scale", 1.0)))


@mapping(CAFFE, "ROIAlign")
def roi_align(node: OriginNode, g: Any) -> Value:
    """Detectron's RoIAlign as the Caffe forks carry it (roi_align_param pooled_h, pooled_w,
    spatial_scale, sampling_ratio; rois (R, 5) [batch, x1, y1, x2, y2]); no half-pixel shift
    (ONNX's output_half_pixel), sampling_ratio 0 = adaptive."""
    p = Params(node, "roi_align_param")
    ph, pw = int(p.get("pooled_h", 1)), int(p.get("pooled_w", 1))
    if ph < 1 or pw < 1:
        raise p.error("pooled_h", (ph, pw), "pooled_h and pooled_w must be >= 1")
    if g.num_inputs != 2:
        raise g.error(f"takes 2 bottoms (features, rois), got {g.num_inputs}")
    rois = g.op("Reshape", [g.input(1)], shape=(-1, 5))
    r = int(rois.shape[0])
    boxes = g.op("Slice", [rois], starts=(1,), ends=(5,), axes=(1,))
    idx = g.op("Cast", [g.op("Reshape", [g.op("Slice", [rois], starts=(0,), ends=(1,), axes=(1,))],
                             shape=(r,))], to="i64")
    return g.op("RoiAlign", [g.input(0), boxes, idx], coordinate_transformation_mode="output_half_pixel",
                mode="avg", output_height=ph, output_width=pw,
                sampling_ratio=int(p.get("sampling_ratio", 0)), spatial_scale=float(p.get("spatial_scale", 1.0)))


@mapping(CAFFE, "Proposal")
def proposal(node: OriginNode, g: Any) -> Any:
    """The C++ Proposal layer (proposal_param feat_stride, base_size, min_size, ratio, scale,
    pre_nms_topn, post_nms_topn, nms_thresh; bottoms scores, deltas, im_info). Its rois have
    post_nms_topn rows here (zero past the proposals kept); a second top gets the scores."""
    p = Params(node, "proposal_param")
    if g.num_inputs != 3:
        raise g.error(f"takes 3 bottoms (scores, bbox deltas, im_info), got {g.num_inputs}")
    attrs = dict(feat_stride=int(p.get("feat_stride", 16)), base_size=int(p.get("base_size", 16)),
                 min_size=int(p.get("min_size", 16)), ratios=tuple(p.floats("ratio")) or (0.5, 1.0, 2.0),
                 scales=tuple(p.floats("scale")) or (8.0, 16.0, 32.0),
                 pre_nms_topn=int(p.get("pre_nms_topn", 6000)), post_nms_topn=int(p.get("post_nms_topn", 300)),
                 nms_thresh=float(p.get("nms_thresh", 0.7)))
    if np.any(np.asarray(attrs["ratios"]) <= 0) or np.any(np.asarray(attrs["scales"]) <= 0):
        raise p.error("ratio", attrs["ratios"], "ratios and scales must be > 0")
    rois, scores = g.op("Proposal", g.inputs(), num_outputs=2, **attrs)
    return (rois, scores) if len(node.outputs) > 1 else rois


@mapping(CAFFE, "Region")
def region(node: OriginNode, g: Any) -> Value:
    """YOLOv2's region layer at inference, as darknet's forward_region_layer computes it
    (src/region_layer.c) and the Caffe forks that port it (nv_caffe, RegionYolo): for each
    of ``num`` anchors, the channels [x, y, w, h, objectness, classes...]; x, y and the
    objectness go through the logistic, the classes through a softmax (``softmax: false``
    leaves them raw, darknet's ``logistic`` classes are not built in), w and h stay raw. The
    output has the input's shape; decoding boxes is the post-processing's job."""
    p = Params(node, "region_param")
    x = g.input(0)
    if len(x.shape) != 4:
        raise g.unsupported(f"input of rank {len(x.shape)}: Region is 2-D (N, C, H, W)")
    n, c, h, w = (int(d) for d in x.shape)
    classes = int(p.get("classes", p.get("num_classes", 20)))
    coords = int(p.get("coords", 4))
    num = int(p.get("num", p.get("boxes_of_each_grid", 5)))
    per = coords + 1 + classes
    if coords < 2 or classes < 1 or num < 1 or c != num * per:
        raise p.error("num", num, f"the input's {c} channels must be num * (coords + 1 + classes) = "
                      f"{num} * ({coords} + 1 + {classes})")
    t = g.op("Reshape", [x], shape=(n, num, per, h, w))
    xy, wh, obj, cls = g.op("Split", [t], axis=2, split=[2, coords - 2, 1, classes], num_outputs=4)
    parts = [g.op("Sigmoid", [xy])]
    if coords > 2:
        parts.append(wh)
    parts.append(g.op("Sigmoid", [obj]))
    parts.append(g.op("Softmax", [cls], axis=2) if p.get("softmax", True) is not False else cls)
    return g.op("Reshape", [g.op("Concat", parts, axis=2)], shape=(n, c, h, w))


@mapping(CAFFE, "Nms")
def nms(node: OriginNode, g: Any) -> Value:
    """OpenPose's Nms layer (CMU-Perceptual-Computing-Lab/caffe_rtpose nms_layer.cpp):
    nms_param threshold (0.5) and num_peak (100), the defaults of its caffe.proto. The fork
    writes past its output when a map has more than num_peak peaks; here the first num_peak
    in scan order are kept."""
    p = Params(node, "nms_param")
    return g.op("HeatmapPeaks", [g.input(0)], threshold=float(p.get("threshold", 0.5)),
                num_peak=int(p.get("num_peak", 100)))
