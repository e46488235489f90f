"""ONNX mappings: MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool.

Semantics: https://onnx.ai/onnx/operators/. Versions: MaxPool-8 adds the Indices output and
storage_order, -10 ceil_mode and dilations; AveragePool-7 count_include_pad, -10 ceil_mode,
-19 dilations; LpPool-1 and GlobalLpPool-1 take p as a float (the IR's p is an int: a
fractional p is reported), from 2 as an int; LpPool-18 adds ceil_mode and dilations. Absent
attributes of older versions mean what the newer defaults mean, so each op needs one mapping
per attribute set. auto_pad becomes explicit pads (see conv.py). RoiAlign-10 behaves as
coordinate_transformation_mode=output_half_pixel, -16 defaults to half_pixel. MaxRoiPool maps
onto the IR's ROIPooling (the same rounded-roi, integer-bin max as Caffe's layer).
"""

from __future__ import annotations

from typing import Any

from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping
from .conv import auto_pad_of, ints_attr, resolve_pads
from .elementwise import checked_attrs, one_to_one, required_input

ONNX = Framework.ONNX
_WINDOW = ("auto_pad", "kernel_shape", "pads", "strides")


def window_attrs(node: OriginNode, g: MapContext) -> tuple[Any, dict[str, Any]]:
    """Input X and the IR window attributes of a pooling node (pads resolved from auto_pad)."""
    x = required_input(g, 0, "X")
    nsp = len(x.shape) - 2
    if nsp < 1:
        raise g.error(f"X has shape {list(x.shape)}; pooling needs N, C and spatial axes")
    k = ints_attr(node, g, "kernel_shape", nsp)
    if k is None:
        raise g.error("required but absent", attr="kernel_shape",
                      hint="give the pooling window, one entry per spatial axis")
    s = ints_attr(node, g, "strides", nsp) or (1,) * nsp
    d = ints_attr(node, g, "dilations", nsp) or (1,) * nsp
    ceil = node.attrs.get("ceil_mode")  # from opset 10 (LpPool 18); before, the IR's floor
    if auto_pad_of(node, g) != "NOTSET":
        ceil = 0  # with auto_pad the output size is fixed (ceil(in / stride) or VALID)
    attrs = {"kernel_shape": k, "strides": s, "dilations": d, "ceil_mode": ceil,
             "pads": resolve_pads(node, g, x, k, s, d)}
    return x, attrs


def _int_p(node: OriginNode, g: MapContext) -> int:
    p = node.get_attr("p")
    if float(p) != int(float(p)) or int(float(p)) < 1:
        raise g.unsupported(f"attribute 'p' = {p}: only whole orders >= 1 are supported")
    return int(float(p))


def _has_output(node: OriginNode, i: int) -> bool:
    return len(node.outputs) > i and bool(node.outputs[i])


# -- MaxPool ---------------------------------------------------------------------------------
def _maxpool(node: OriginNode, g: MapContext, known: tuple[str, ...]) -> Any:
    checked_attrs(node, g, known)
    x, attrs = window_attrs(node, g)
    with_indices = _has_output(node, 1)
    # storage_order exists from opset 8; before it, the IR's default (row-major) is the meaning
    return g.op("MaxPool", [x], storage_order=node.attrs.get("storage_order"),
                output_indices=with_indices, num_outputs=2 if with_indices else 1, **attrs)


@mapping(ONNX, "MaxPool", since_opset=1)
def maxpool_v1(node: OriginNode, g: MapContext) -> Any:
    return _maxpool(node, g, _WINDOW)


@mapping(ONNX, "MaxPool", since_opset=8)
def maxpool_v8(node: OriginNode, g: MapContext) -> Any:
    return _maxpool(node, g, _WINDOW + ("storage_order",))


@mapping(ONNX, "MaxPool", since_opset=10)
def maxpool_v10(node: OriginNode, g: MapContext) -> Any:
    return _maxpool(node, g, _WINDOW + ("storage_order", "ceil_mode", "dilations"))


# -- AveragePool -----------------------------------------------------------------------------
def _avgpool(node: OriginNode, g: MapContext, known: tuple[str, ...]) -> Any:
    checked_attrs(node, g, known)
    x, attrs = window_attrs(node, g)
    # count_include_pad exists from opset 7; before it, pads were not counted (the IR's default)
    return g.op("AveragePool", [x], count_include_pad=node.attrs.get("count_include_pad"), **attrs)


@mapping(ONNX, "AveragePool", since_opset=1)
def avgpool_v1(node: OriginNode, g: MapContext) -> Any:
    return _avgpool(node, g, _WINDOW)


@mapping(ONNX, "AveragePool", since_opset=7)
def avgpool_v7(node: OriginNode, g: MapContext) -> Any:
    return _avgpool(node, g, _WINDOW + ("count_include_pad",))


@mapping(ONNX, "AveragePool", since_opset=10)
def avgpool_v10(node: OriginNode, g: MapContext) -> Any:
    return _avgpool(node, g, _WINDOW + ("count_include_pad", "ceil_mode"))


@mapping(ONNX, "AveragePool", since_opset=19)
def avgpool_v19(node: OriginNode, g: MapContext) -> Any:
    return _avgpool(node, g, _WINDOW + ("count_include_pad", "ceil_mode", "dilations"))


# -- LpPool ----------------------------------------------------------------------------------
def _lppool(node: OriginNode, g: MapContext, known: tuple[str, ...]) -> Any:
    checked_attrs(node, g, known)
    x, attrs = window_attrs(node, g)
    return g.op("LpPool", [x], p=_int_p(node, g), **attrs)


@mapping(ONNX, "LpPool", since_opset=1)
def lppool_v1(node: OriginNode, g: MapContext) -> Any:
    return _lppool(node, g, _WINDOW + ("p",))


@mapping(ONNX, "LpPool", since_opset=18)
def lppool_v18(node: OriginNode, g: MapContext) -> Any:
    return _lppool(node, g, _WINDOW + ("p", "ceil_mode", "dilations"))


# -- global pools ----------------------------------------------------------------------------
one_to_one("GlobalAveragePool", 1)
one_to_one("GlobalMaxPool", 1)


@mapping(ONNX, "GlobalLpPool", since_opset=1)
def global_lppool(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("p",))
    return g.op("GlobalLpPool", [required_input(g, 0, "X")], p=_int_p(node, g))


# -- RoiAlign, MaxRoiPool ------------------------------------------------------------------------
def _roialign(node: OriginNode, g: MapContext, known: tuple[str, ...], ctm: str) -> Any:
    a = checked_attrs(node, g, known)
    a.setdefault("coordinate_transformation_mode", ctm)
    ins = [required_input(g, 0, "X"), required_input(g, 1, "rois"),
           required_input(g, 2, "batch_indices")]
    if ins[2].dtype != "i64":
        ins[2] = g.op("Cast", [ins[2]], to="i64")
    return g.op("RoiAlign", ins, **a)


@mapping(ONNX, "RoiAlign", since_opset=10)
def roialign_v10(node: OriginNode, g: MapContext) -> Any:
    # RoiAlign-10 had no coordinate_transformation_mode; it behaved as output_half_pixel
    return _roialign(node, g, ("mode", "output_height", "output_width", "sampling_ratio",
                               "spatial_scale"), "output_half_pixel")


@mapping(ONNX, "RoiAlign", since_opset=16)
def roialign_v16(node: OriginNode, g: MapContext) -> Any:
    return _roialign(node, g, ("coordinate_transformation_mode", "mode", "output_height",
                               "output_width", "sampling_ratio", "spatial_scale"), "half_pixel")


@mapping(ONNX, "MaxRoiPool", since_opset=1)
def max_roi_pool(node: OriginNode, g: MapContext) -> Any:
    # the same computation as Caffe's ROIPooling (rounded roi, floor/ceil integer bins)
    checked_attrs(node, g, ("pooled_shape", "spatial_scale"))
    shape = node.get_attr("pooled_shape", None)
    if shape is None or len(shape) != 2:
        raise g.error(f"= {shape!r}: must be [pooled_h, pooled_w]", attr="pooled_shape")
    return g.op("ROIPooling", [required_input(g, 0, "X"), required_input(g, 1, "rois")],
                pooled_h=int(shape[0]), pooled_w=int(shape[1]),
                spatial_scale=float(node.get_attr("spatial_scale")))


@mapping(ONNX, "MaxUnpool", since_opset=9)
def max_unpool(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("kernel_shape", "pads", "strides"))
    x, ids = required_input(g, 0, "X"), required_input(g, 1, "I")
    nsp = len(x.shape) - 2
    k = ints_attr(node, g, "kernel_shape", nsp)
    if k is None:
        raise g.error("required but absent", attr="kernel_shape")
    extra: dict[str, Any] = {}
    if g.has_input(2):
        extra["output_shape"] = tuple(int(v) for v in g.require_const(2, "output_shape").reshape(-1))
    return g.op("MaxUnpool", [x, ids], kernel_shape=k, strides=ints_attr(node, g, "strides", nsp),
                pads=ints_attr(node, g, "pads", 2 * nsp), **extra)
