"""Shared pieces of the Caffe mappings: parameter access with the schema's defaults, the
geometry of convolution and pooling layers as Caffe computes it, and size limits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import AttrError, ShapeError
from ...parsers.caffe import layer_defaults
from ...parsers.origin import OriginNode
from ..context import error_context

_MISSING: Any = object()

#: The most values a mapping computes into one constant from shapes alone (PriorBox boxes,
#: AVE-pooling divisor corrections): 1 GiB of float32, far above any real net's, checked
#: before the array is built so that hostile input dims cannot exhaust memory at conversion.
MAX_CONSTANT_ELEMENTS = 1 << 28


def check_constant_size(node: OriginNode, count: int, what: str) -> None:
    """Refuse to build a shape-derived constant of ``count`` values above the limit."""
    if count > MAX_CONSTANT_ELEMENTS:
        raise ShapeError(
            f"its {what} would be a constant of {count} values, above the limit "
            f"of {MAX_CONSTANT_ELEMENTS}",
            hint="check the input dims; raise opbridge.mappers.caffe.common.MAX_CONSTANT_ELEMENTS "
            "if they are real", **error_context(node),
        )


class Params:
    """A layer's parameter block: the values set in the prototxt, else the schema's defaults."""

    def __init__(self, node: OriginNode, block: str) -> None:
        self.node = node
        self.block = block
        self.defaults = layer_defaults(block)

    def has(self, name: str) -> bool:
        return name in self.node.attrs

    def get(self, name: str, default: Any = _MISSING) -> Any:
        if name in self.node.attrs:
            return self.node.attrs[name]
        if default is not _MISSING:
            return default
        if name in self.defaults:
            return self.defaults[name]
        raise AttrError("required but absent", hint=f"set {name} in the layer's {self.block} block",
                        **error_context(self.node, attribute=f"{self.block}.{name}"))

    def ints(self, name: str) -> list[int]:
        """A repeated (or single) numeric field as a list of ints ([] when unset)."""
        v = self.node.attrs.get(name, [])
        items = v if isinstance(v, list) else [v]
        try:
            return [int(x) for x in items]
        except (TypeError, ValueError):
            raise self.error(name, v, "expected integers") from None

    def floats(self, name: str) -> list[float]:
        v = self.node.attrs.get(name, [])
        items = v if isinstance(v, list) else [v]
        try:
            return [float(x) for x in items]
        except (TypeError, ValueError):
            raise self.error(name, v, "expected numbers") from None

    def error(self, name: str, value: Any, why: str, hint: str | None = None) -> AttrError:
        return AttrError(why, hint=hint,
                         **error_context(self.node, attribute=f"{self.block}.{name}", value=value))


def norm_axis(p: Params, name: str, axis: int, rank: int) -> int:
    """A Caffe axis (negative counts from the end) checked against ``rank``."""
    if not -rank <= axis < rank:
        raise p.error(name, axis, f"out of range for a rank-{rank} input")
    return axis % rank


@dataclass
class ConvGeometry:
    """Kernel, stride, pad and dilation per spatial axis, as BVLC's BaseConvolutionLayer reads them."""

    kernel: list[int]
    stride: list[int]
    pad: list[int]
    dilation: list[int]


def _per_axis(p: Params, name: str, values: list[int], n: int, default: int) -> list[int]:
    if not values:
        return [default] * n
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise p.error(name, values, f"give 1 value or {n} (one per spatial axis)")
    return values


def conv_geometry(p: Params, num_spatial: int) -> ConvGeometry:
    """Read a convolution_param's geometry; ``*_h``/``*_w`` fields win for 2-D, as in Caffe."""
    if p.has("kernel_h") or p.has("kernel_w"):
        if num_spatial != 2 or not (p.has("kernel_h") and p.has("kernel_w")):
            raise p.error("kernel_h", p.get("kernel_h", None), "kernel_h and kernel_w go together, 2-D only")
        kernel = [int(p.get("kernel_h")), int(p.get("kernel_w"))]
    else:
        kernel = _per_axis(p, "kernel_size", p.ints("kernel_size"), num_spatial, 0)
        if not p.ints("kernel_size"):
            raise p.error("kernel_size", None, "required (or kernel_h and kernel_w)")
    if p.has("stride_h") or p.has("stride_w"):
        stride = [int(p.get("stride_h", 1)), int(p.get("stride_w", 1))]
    else:
        stride = _per_axis(p, "stride", p.ints("stride"), num_spatial, 1)
    if p.has("pad_h") or p.has("pad_w"):
        pad = [int(p.get("pad_h", 0)), int(p.get("pad_w", 0))]
    else:
        pad = _per_axis(p, "pad", p.ints("pad"), num_spatial, 0)
    dilation = _per_axis(p, "dilation", p.ints("dilation"), num_spatial, 1)
    for name, vals, low in (("kernel_size", kernel, 1), ("stride", stride, 1), ("dilation", dilation, 1)):
        if any(v < low for v in vals):
            raise p.error(name, vals, f"must be >= {low}")
    return ConvGeometry(kernel, stride, pad, dilation)


def conv_out(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - (d * (k - 1) + 1)) // s + 1


def deconv_out(size: int, k: int, s: int, p: int, d: int) -> int:
    return s * (size - 1) + d * (k - 1) + 1 - 2 * p


@dataclass
class PoolGeometry:
    """A pooling layer's window: global, kernel, stride, pad (H, W) and the rounding."""

    is_global: bool
    kernel: list[int]
    stride: list[int]
    pad: list[int]
    ceil: bool


def pool_geometry(p: Params, hw: Sequence[int]) -> PoolGeometry:
    """Read pooling_param as BVLC's PoolingLayer::LayerSetUp does (plus ceil_mode of forks)."""
    is_global = bool(p.get("global_pooling"))
    if is_global:
        kernel = [int(hw[0]), int(hw[1])]
    elif p.has("kernel_h") or p.has("kernel_w"):
        kernel = [int(p.get("kernel_h")), int(p.get("kernel_w"))]
    elif p.has("kernel_size"):
        kernel = [int(p.get("kernel_size"))] * 2
    else:
        raise p.error("kernel_size", None, "required unless global_pooling is true")
    if p.has("pad_h") or p.has("pad_w"):
        pad = [int(p.get("pad_h")), int(p.get("pad_w"))]
    else:
        pad = [int(p.get("pad"))] * 2
    if p.has("stride_h") or p.has("stride_w"):
        stride = [int(p.get("stride_h")), int(p.get("stride_w"))]
    else:
        stride = [int(p.get("stride"))] * 2
    if is_global:
        pad, stride = [0, 0], [1, 1]
    if any(k < 1 for k in kernel) or any(s < 1 for s in stride):
        raise p.error("kernel_size", kernel, "kernel and stride must be >= 1")
    if any(pad[i] >= kernel[i] for i in range(2)):
        raise p.error("pad", pad, f"must be smaller than the kernel {kernel}")
    ceil = p.get("round_mode") == "CEIL"
    if p.has("ceil_mode"):  # a fork field (DenseNet-Caffe, ...): false means floor rounding
        ceil = bool(p.get("ceil_mode"))
    return PoolGeometry(is_global, kernel, stride, pad, ceil)


def pool_out(size: int, k: int, s: int, pad: int, ceil: bool, any_pad: bool) -> int:
    """Caffe's pooled size: ceil (or floor) rounding; then, when the layer has any padding
    (``any_pad``: pad_h or pad_w), the last window must start inside the image plus its
    top/left pad (``(out - 1) * stride < size + pad``)."""
    span = size + 2 * pad - k
    out = (-(-span // s) if ceil else span // s) + 1
    if any_pad and (out - 1) * s >= size + pad:
        out -= 1
    return out
