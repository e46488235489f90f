"""Caffe Pooling, with Caffe's output size and average divisor (not ONNX's)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..registry import mapping
from .common import Params, pool_geometry, pool_out


def _divisor(size: int, out: int, k: int, s: int, pad: int) -> np.ndarray:
    """Caffe's AVE divisor along one axis: the window clipped to [-pad, size + pad)."""
    start = np.arange(out) * s - pad
    end = np.minimum(start + k, size + pad)
    return (end - start).astype(np.float32)


@mapping(Framework.CAFFE, "Pooling")
def pooling(node: OriginNode, g: Any) -> Value:
    """MAX/AVE pooling. The output size uses Caffe's ceil rounding and its rule that the last
    window starts inside the image plus its top/left pad; the extra bottom/right reach is
    expressed as explicit end pads. AVE divides by the window clipped to the padded image
    (pads count, the ceil overhang does not): an AveragePool counting pads, times a constant
    correction where the overhang made the windows smaller."""
    p = Params(node, "pooling_param")
    x = g.input(0)
    if len(x.shape) != 4:
        raise g.unsupported(f"input of rank {len(x.shape)}: Caffe pooling is 2-D (N, C, H, W)")
    method = p.get("pool")
    if method not in ("MAX", "AVE"):
        raise g.unsupported(f"pooling_param.pool = {method}: only MAX and AVE are supported",
                            hint="STOCHASTIC pooling is a training-time method")
    hw = [int(d) for d in x.shape[2:]]
    geo = pool_geometry(p, hw)
    if geo.is_global:
        return g.op("GlobalMaxPool" if method == "MAX" else "GlobalAveragePool", [x])
    any_pad = any(geo.pad)
    outs = [pool_out(hw[i], geo.kernel[i], geo.stride[i], geo.pad[i], geo.ceil, any_pad) for i in range(2)]
    end = [max(0, (outs[i] - 1) * geo.stride[i] + geo.kernel[i] - hw[i] - geo.pad[i]) for i in range(2)]
    pads = [geo.pad[0], geo.pad[1], end[0], end[1]]
    common = dict(kernel_shape=geo.kernel, strides=geo.stride, pads=pads, ceil_mode=0)
    if method == "MAX":
        return g.op("MaxPool", [x], num_outputs=1, **common)
    y = g.op("AveragePool", [x], count_include_pad=1, **common)
    dh = _divisor(hw[0], outs[0], geo.kernel[0], geo.stride[0], geo.pad[0])
    dw = _divisor(hw[1], outs[1], geo.kernel[1], geo.stride[1], geo.pad[1])
    full = float(geo.kernel[0] * geo.kernel[1])
    corr = full / np.outer(dh, dw)
    if np.all(corr == 1.0):
        return y
    return g.op("Mul", [y, g.constant(corr.reshape(1, 1, *outs).astype(np.float32))])
