"""Convolutions (1-3 D, grouped, transposed) and pooling (max, average, adaptive)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, static_shape, ts_mapping


def _per_axis(g: MapContext, values: list[int] | None, n: int, what: str, default: int) -> list[int]:
    """torch lets a one-element list stand for every spatial axis."""
    if not values:
        return [default] * n
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise g.error(f"{what} = {values}: needs 1 or {n} values for {n} spatial axes", attr=what)
    return values


def _conv(g: MapContext, x: Value, w: Value, b: Value | None, stride: Any, padding: Any,
          dilation: Any, groups: int, transposed: bool = False, output_padding: Any = None) -> Value:
    n = len(w.shape) - 2
    strides = _per_axis(g, stride, n, "stride", 1)
    dilations = _per_axis(g, dilation, n, "dilation", 1)
    kernel = [int(d) for d in w.shape[2:]]
    if isinstance(padding, str):
        if padding == "valid":
            pads = [0] * (2 * n)
        elif padding == "same":
            total = [d * (k - 1) for d, k in zip(dilations, kernel)]
            pads = [t // 2 for t in total] + [t - t // 2 for t in total]
        else:
            raise g.error(f"padding = {padding!r}: must be 'same', 'valid' or sizes", attr="padding")
    else:
        p = _per_axis(g, padding, n, "padding", 0)
        pads = p + p
    attrs: dict[str, Any] = dict(strides=strides, dilations=dilations, pads=pads, group=groups,
                                 kernel_shape=kernel)
    if transposed:
        attrs["output_padding"] = _per_axis(g, output_padding, n, "output_padding", 0)
        return g.op("ConvTranspose", [x, w, b], **attrs)
    return g.op("Conv", [x, w, b], **attrs)


@ts_mapping("conv1d", "conv2d", "conv3d", "_convolution_mode")
def conv(node: OriginNode, g: MapContext) -> Any:
    # (input, weight, bias, stride, padding, dilation, groups); padding may be 'same'/'valid'
    a = Args(node, g)
    return _conv(g, a.tensor(0), a.tensor(1), a.optional_tensor(2), a.ints(3), a.py(4),
                 a.ints(5), a.int(6, 1))


@ts_mapping("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def conv_transpose(node: OriginNode, g: MapContext) -> Any:
    # (input, weight, bias, stride, padding, output_padding, groups, dilation)
    a = Args(node, g)
    return _conv(g, a.tensor(0), a.tensor(1), a.optional_tensor(2), a.ints(3), a.ints(4),
                 a.ints(7), a.int(6, 1), transposed=True, output_padding=a.ints(5))


@ts_mapping("_convolution", "convolution")
def convolution(node: OriginNode, g: MapContext) -> Any:
    # (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, ...)
    a = Args(node, g)
    return _conv(g, a.tensor(0), a.tensor(1), a.optional_tensor(2), a.ints(3), a.ints(4),
                 a.ints(5), a.int(8, 1), transposed=bool(a.py(6)), output_padding=a.ints(7))


def _pool_common(g: MapContext, a: Args, n: int) -> tuple[list[int], list[int], list[int]]:
    kernel = _per_axis(g, a.ints(1), n, "kernel_size", 1)
    strides = _per_axis(g, a.ints(2) or kernel, n, "stride", 1)  # empty stride: the kernel
    pad = _per_axis(g, a.ints(3), n, "padding", 0)
    return kernel, strides, pad + pad


@ts_mapping("max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices")
def max_pool(node: OriginNode, g: MapContext) -> Any:
    # (input, kernel_size, stride, padding, dilation, ceil_mode)
    a = Args(node, g)
    x = a.tensor(0)
    n = len(x.shape) - 2
    kernel, strides, pads = _pool_common(g, a, n)
    y = g.op("MaxPool", [x], num_outputs=1, kernel_shape=kernel, strides=strides, pads=pads,
             dilations=_per_axis(g, a.ints(4), n, "dilation", 1), ceil_mode=int(bool(a.py(5, False))))
    if node.op_type.endswith("with_indices"):
        return y, None
    return y


@ts_mapping("avg_pool1d", "avg_pool2d", "avg_pool3d")
def avg_pool(node: OriginNode, g: MapContext) -> Any:
    # (input, kernel_size, stride, padding, ceil_mode, count_include_pad[, divisor_override])
    a = Args(node, g)
    x = a.tensor(0)
    n = len(x.shape) - 2
    kernel, strides, pads = _pool_common(g, a, n)
    ceil, with_pad = bool(a.py(4, False)), bool(a.py(5, True))
    divisor = None if a.is_none(6) else a.int(6, what="divisor_override")
    if divisor is None:
        return g.op("AveragePool", [x], kernel_shape=kernel, strides=strides, pads=pads,
                    ceil_mode=int(ceil), count_include_pad=int(with_pad))
    if ceil or divisor == 0:
        raise g.unsupported(f"divisor_override = {divisor} with ceil_mode = {ceil} is not supported",
                            hint="use ceil_mode=False and a non-zero divisor, or divide in the model")
    # every window then covers the whole kernel (padding counted): its sum is mean * kernel size
    mean = g.op("AveragePool", [x], kernel_shape=kernel, strides=strides, pads=pads, ceil_mode=0,
                count_include_pad=1)
    return g.op("Mul", [mean, a.scalar_value(float(np.prod(kernel)) / divisor, like=mean)])


def _adaptive(node: OriginNode, g: MapContext, op: str) -> Value:
    a = Args(node, g)
    x = a.tensor(0)
    shape = static_shape(g, x)
    n = len(shape) - 2
    sizes = a.py(1)
    sizes = [sizes] * n if isinstance(sizes, int) else list(sizes)
    if len(sizes) == 1 and n > 1:
        sizes = sizes * n
    sizes = [shape[2 + i] if s is None else int(s) for i, s in enumerate(sizes)]
    if len(sizes) != n:
        raise g.error(f"output_size = {sizes}: needs {n} values", attr="output_size")
    if all(s == 1 for s in sizes):
        return g.op("Global" + op, [x])
    ins = shape[2:]
    if any(i % s for i, s in zip(ins, sizes)):
        return _adaptive_uneven(g, x, ins, sizes, "ReduceMean" if op == "AveragePool" else "ReduceMax")
    kernel = [i // s for i, s in zip(ins, sizes)]
    extra = {"num_outputs": 1} if op == "MaxPool" else {}
    return g.op(op, [x], kernel_shape=kernel, strides=kernel, pads=[0] * (2 * n), **extra)


def _adaptive_uneven(g: MapContext, x: Value, ins: tuple[int, ...], sizes: list[int], reduce: str) -> Value:
    """Adaptive pooling with uneven windows, one spatial axis at a time (mean and max of a
    rectangle are the mean/max over one axis of the mean/max over the other): output i of an
    axis of size n pools [floor(i*n/out), ceil((i+1)*n/out)), as torch does."""
    y = x
    for ax, (n, out) in enumerate(zip(ins, sizes)):
        axis = 2 + ax
        if n == out:
            continue
        pieces = []
        for i in range(out):
            start, end = (i * n) // out, -((-(i + 1) * n) // out)
            piece = g.op("Slice", [y], starts=[start], ends=[end], axes=[axis], steps=[1])
            pieces.append(g.op(reduce, [piece], axes=[axis], keepdims=1))
        y = pieces[0] if len(pieces) == 1 else g.op("Concat", pieces, axis=axis)
    return y


@ts_mapping("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d")
def adaptive_avg_pool(node: OriginNode, g: MapContext) -> Any:
    return _adaptive(node, g, "AveragePool")


@ts_mapping("adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d")
def adaptive_max_pool(node: OriginNode, g: MapContext) -> Any:
    y = _adaptive(node, g, "MaxPool")
    return (y, None) if len(node.outputs) > 1 else y
