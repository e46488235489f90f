"""Caffe Pooling and SPP, with Caffe's output size and average divisor (not ONNX's)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..registry import mapping
from .common import Params, check_constant_size, pool_geometry, pool_out


def _divisor(size: int, out: int, k: int, s: int, pad: int) -> np.ndarray:
    """Caffe's AVE divisor along one axis: the window clipped to [-pad, size + pad)."""
    start = np.arange(out) * s - pad
    end = np.minimum(start + k, size + pad)
    return (end - start).astype(np.float32)


def caffe_pool(g: Any, x: Value, method: str, kernel: list[int], stride: list[int],
               pad: list[int], ceil: bool = True, with_indices: bool = False) -> Any:
    """Caffe's pooling of a (N, C, H, W) value with an explicit window (see :func:`pooling`)."""
    hw = [int(d) for d in x.shape[2:]]
    any_pad = any(pad)
    outs = [pool_out(hw[i], kernel[i], stride[i], pad[i], ceil, any_pad) for i in range(2)]
    end = [max(0, (outs[i] - 1) * stride[i] + kernel[i] - hw[i] - pad[i]) for i in range(2)]
    common = dict(kernel_shape=kernel, strides=stride, pads=[pad[0], pad[1], end[0], end[1]], ceil_mode=0)
    if method == "MAX":
        if with_indices:
            return g.op("MaxPool", [x], num_outputs=2, output_indices=True, **common)
        return g.op("MaxPool", [x], num_outputs=1, **common)
    y = g.op("AveragePool", [x], count_include_pad=1, **common)
    dh = _divisor(hw[0], outs[0], kernel[0], stride[0], pad[0])
    dw = _divisor(hw[1], outs[1], kernel[1], stride[1], pad[1])
    if np.all(dh == kernel[0]) and np.all(dw == kernel[1]):
        return y
    check_constant_size(g.node, outs[0] * outs[1], "average divisor correction")
    corr = float(kernel[0] * kernel[1]) / np.outer(dh, dw)
    return g.op("Mul", [y, g.constant(corr.reshape(1, 1, *outs).astype(np.float32))])


def _check_method(g: Any, method: str, block: str) -> None:
    if method not in ("MAX", "AVE"):
        raise g.unsupported(f"{block}.pool = {method}: only MAX and AVE are supported",
                            hint="STOCHASTIC pooling is a training-time method")


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
    _check_method(g, method, "pooling_param")
    hw = [int(d) for d in x.shape[2:]]
    geo = pool_geometry(p, hw)
    if len(node.outputs) == 2 and method == "MAX":  # SegNet: the second top is the argmax mask
        from .forks import pooling_mask
        y, idx = caffe_pool(g, x, method, geo.kernel, geo.stride, geo.pad, geo.ceil, with_indices=True)
        return y, pooling_mask(g, x, idx)
    if geo.is_global:
        return g.op("GlobalMaxPool" if method == "MAX" else "GlobalAveragePool", [x])
    return caffe_pool(g, x, method, geo.kernel, geo.stride, geo.pad, geo.ceil)


def spp_levels(p: Params, h: int, w: int) -> list[tuple[list[int], list[int]]]:
    """(kernel, pad) of each pyramid level, as BVLC's SPPLayer::GetPoolingParam computes them;
    a level whose pad reaches its kernel (more bins than the input has rows or columns) is an
    error, as Caffe's pooling check makes it, which also bounds the number of levels."""
    levels = int(p.get("pyramid_height", 0))
    if levels < 1:
        raise p.error("pyramid_height", levels, "required, >= 1")
    out = []
    for level in range(levels):
        bins = 2 ** level
        kernel = [-(-h // bins), -(-w // bins)]
        pad = [(kernel[0] * bins - h + 1) // 2, (kernel[1] * bins - w + 1) // 2]
        if h < 1 or w < 1 or pad[0] >= kernel[0] or pad[1] >= kernel[1]:
            raise p.error("pyramid_height", levels,
                          f"level {level} ({bins}x{bins} bins) does not fit the {h}x{w} input",
                          hint=f"use at most {level} levels for this input")
        out.append((kernel, pad))
    return out


@mapping(Framework.CAFFE, "SPP")
def spp(node: OriginNode, g: Any) -> Value:
    """Spatial pyramid pooling: level l pools into 2^l x 2^l bins (kernel ceil(H / bins), the
    remainder split as padding, stride = kernel, as BVLC's SPPLayer::GetPoolingParam), each
    level flattened, all concatenated along axis 1."""
    p = Params(node, "spp_param")
    x = g.input(0)
    if len(x.shape) != 4:
        raise g.unsupported(f"input of rank {len(x.shape)}: SPP is 2-D (N, C, H, W)")
    method = p.get("pool")
    _check_method(g, method, "spp_param")
    n, c, h, w = (int(d) for d in x.shape)
    levels = spp_levels(p, h, w)
    flat = []
    for kernel, pad in levels:
        y = caffe_pool(g, x, method, kernel, kernel, pad)
        if len(levels) == 1:  # Caffe's SPP with one level is the pooling itself, not flattened
            return y
        flat.append(g.op("Reshape", [y], shape=(n, c * int(y.shape[2]) * int(y.shape[3]))))
    return g.op("Concat", flat, axis=1)
