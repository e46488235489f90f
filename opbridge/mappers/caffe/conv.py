"""Caffe Convolution (and its depthwise fork types), Deconvolution and InnerProduct."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..registry import mapping
from .common import Params, conv_geometry, norm_axis


def _conv(node: OriginNode, g: Any, depthwise: bool, transposed: bool) -> Value:
    p = Params(node, "convolution_param")
    x = g.input(0)
    if int(p.get("axis")) not in (1, 1 - len(x.shape)):
        raise g.unsupported(f"convolution_param.axis = {p.get('axis')}: only the channel axis 1 is supported")
    geo = conv_geometry(p, len(x.shape) - 2)
    c = int(x.shape[1])
    if not p.has("num_output"):
        raise p.error("num_output", None, "required")
    n = int(p.get("num_output"))
    group = c if depthwise else int(p.get("group"))
    if group < 1 or c % group or n % group:
        raise p.error("group", group, f"must divide the input channels ({c}) and num_output ({n})")
    taps = int(np.prod(geo.kernel))
    if transposed:  # each output sums over every input channel's taps
        w = g.weight(0, (c, n // group, *geo.kernel), kind="linear", fan_in=c * taps)
    else:
        w = g.weight(0, (n, c // group, *geo.kernel), kind="linear", fan_in=c // group * taps)
    ins = [x, w]
    if p.get("bias_term"):
        ins.append(g.weight(1, (n,), kind="bias"))
    attrs = dict(group=group, kernel_shape=geo.kernel, strides=geo.stride, dilations=geo.dilation,
                 pads=geo.pad + geo.pad)
    return g.op("ConvTranspose" if transposed else "Conv", ins, **attrs)


@mapping(Framework.CAFFE, "Convolution")
def convolution(node: OriginNode, g: Any) -> Value:
    """N-D convolution; kernel_h/stride_h/pad_h, group and dilation as Caffe reads them."""
    return _conv(node, g, depthwise=False, transposed=False)


@mapping(Framework.CAFFE, "ConvolutionDepthwise")
def convolution_depthwise(node: OriginNode, g: Any) -> Value:
    """The ShuffleNet/MobileNet fork layer: a convolution with one group per input channel."""
    return _conv(node, g, depthwise=True, transposed=False)


@mapping(Framework.CAFFE, "DepthwiseConvolution")
def depthwise_convolution(node: OriginNode, g: Any) -> Value:
    """Another fork's name for the depthwise convolution."""
    return _conv(node, g, depthwise=True, transposed=False)


@mapping(Framework.CAFFE, "Deconvolution")
def deconvolution(node: OriginNode, g: Any) -> Value:
    """Transposed convolution; blob 0 is (C_in, num_output / group, k...)."""
    return _conv(node, g, depthwise=False, transposed=True)


@mapping(Framework.CAFFE, "InnerProduct")
def inner_product(node: OriginNode, g: Any) -> Value:
    """y = x W^T + b over the axes from ``axis`` on, flattened; ``transpose`` stores W as (K, N)."""
    p = Params(node, "inner_product_param")
    x = g.input(0)
    rank = len(x.shape)
    axis = norm_axis(p, "axis", int(p.get("axis")), rank)
    pre = tuple(int(d) for d in x.shape[:axis])
    k = int(np.prod(x.shape[axis:]))
    if not p.has("num_output"):
        raise p.error("num_output", None, "required")
    n = int(p.get("num_output"))
    transpose = bool(p.get("transpose"))
    w = g.weight(0, (k, n) if transpose else (n, k), kind="linear", fan_in=k)
    rows = int(np.prod(pre)) if pre else 1
    a = x if rank == 2 and axis == 1 else g.op("Reshape", [x], shape=(rows, k))
    ins = [a, w]
    if p.get("bias_term"):
        ins.append(g.weight(1, (n,), kind="bias"))
    y = g.op("Gemm", ins, transB=0 if transpose else 1)
    if pre != (rows,):
        y = g.op("Reshape", [y], shape=(*pre, n))
    return y
