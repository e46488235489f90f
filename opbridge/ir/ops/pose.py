"""OpenPose's heat-map peak finder (CMU-Perceptual-Computing-Lab/caffe_rtpose nms_layer.cpp):
a host op, its output size fixed by the most peaks it keeps."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op
from .common import FLOATS


def heatmap_peaks(x: np.ndarray, *, threshold: float, num_peak: int) -> np.ndarray:
    """For image n, plane n of the flattened (N * C) planes (the layer assumes one channel):
    every value >= threshold strictly above its 4 neighbours (0 outside the map), in scan
    order; row 0 holds the count, rows 1.. [x, y, value]."""
    n = x.shape[0]
    h, w = x.shape[2:]
    planes = x.reshape(-1, h, w)
    out = np.zeros((n, 1, num_peak + 1, 3), x.dtype)
    for b in range(n):
        v = planes[b]
        pad = np.pad(v, 1)
        core = pad[1:-1, 1:-1]
        peak = ((core >= threshold) & (core > pad[:-2, 1:-1]) & (core > pad[2:, 1:-1])
                & (core > pad[1:-1, :-2]) & (core > pad[1:-1, 2:]))
        ys, xs = np.nonzero(peak)
        k = min(len(ys), num_peak)
        out[b, 0, 0, 0] = k
        out[b, 0, 1:k + 1] = np.stack([xs[:k], ys[:k], v[ys[:k], xs[:k]]], axis=1)
    return out


def _shape(ctx: ShapeContext) -> Any:
    s = ctx.input_shape(0)
    if len(s) != 4:
        raise ctx.error(f"needs (N, C, H, W), got {list(s)}",
                        hint="check the input's shape (--input-shape) and the layer before")
    return (s[0], 1, ctx.attr("num_peak") + 1, 3), ctx.input_dtype(0)


(
    define_op("HeatmapPeaks")
    .doc("OpenPose's Nms layer: local maxima (above the 4 neighbours, at least threshold) of "
         "each image's heat map in scan order; (N, 1, num_peak + 1, 3), row 0 the count, rows "
         "1.. [x, y, value], at most num_peak, the rest zero.")
    .input("x", "T").output("peaks", "T")
    .param("threshold", "float", default=0.5)
    .param("num_peak", "int", default=100, minimum=1)
    .type_param("T", FLOATS)
    .shape_fn(_shape)
    .compute(heatmap_peaks)
    .placement("cpu")  # a data-dependent scan, run on the host
)
