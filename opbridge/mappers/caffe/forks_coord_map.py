"""The crop offsets of the FCN-era ``Crop`` layer (longjon/caffe, the "future" branch that HED's
s9xie/hed and early FCN deploys were written for): no offsets in the prototxt, but computed
from the net by composing each layer's coordinate map (src/caffe/layers/crop_layer.cpp
LayerSetUp, include/caffe/util/coords.hpp). BVLC's ``Crop`` with no ``crop_param`` crops at
offset 0 instead; opbridge follows BVLC (as OpenCV does) unless ``crop_param { mode:
"coord_map" }`` asks for this one."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ...parsers.origin import OriginGraph, OriginNode
from .common import Params, conv_geometry

#: (scale, offset) per spatial axis: a coordinate x of the layer's bottom maps to scale * x + offset.
AxisMap = tuple[Fraction, Fraction]

#: Layers that leave coordinates alone (BVLC python/caffe/coord_map.py PASS_THROUGH_LAYERS,
#: plus the in-place Dropout/Split kin it lists).
PASS_THROUGH = frozenset({"AbsVal", "BatchNorm", "Bias", "BNLL", "Dropout", "Eltwise", "ELU", "Log", "LRN",
                          "Exp", "MVN", "Power", "ReLU", "PReLU", "Scale", "Sigmoid", "Split", "TanH",
                          "Threshold", "Concat"})


def _filter_map(p: Params) -> list[AxisMap]:
    """coords.hpp FilterMap: an output coordinate y sits at input stride * y + (kernel - 1) / 2 - pad."""
    geo = conv_geometry(p, 2)
    if any(d != 1 for d in geo.dilation):
        raise p.error("dilation", geo.dilation, "the coord_map crop (longjon/caffe) has no dilation")
    return [(Fraction(s), Fraction(k - 1, 2) - pad) for k, s, pad in zip(geo.kernel, geo.stride, geo.pad)]


def _inv(m: list[AxisMap]) -> list[AxisMap]:
    return [(1 / a, -b / a) for a, b in m]


def _compose(left: list[AxisMap], right: list[AxisMap]) -> list[AxisMap]:
    """left after right (DiagonalAffineMap::compose)."""
    return [(la * ra, la * rb + lb) for (la, lb), (ra, rb) in zip(left, right)]


def _layer_map(node: OriginNode, crop: OriginNode) -> list[AxisMap]:
    if node.op_type in PASS_THROUGH:
        return [(Fraction(1), Fraction(0))] * 2
    if node.op_type in ("Convolution", "DepthwiseConvolution", "ConvolutionDepthwise"):
        return _inv(_filter_map(Params(node, "convolution_param")))
    if node.op_type == "Deconvolution":
        return _filter_map(Params(node, "convolution_param"))
    if node.op_type == "Pooling":
        p = Params(node, "pooling_param")
        if bool(p.get("global_pooling", False)):
            raise Params(crop, "crop_param").error(
                "mode", "coord_map", f"the path to its bottoms passes global pooling '{node.name}'")
        return _inv(_pool_filter_map(p))
    raise Params(crop, "crop_param").error(
        "mode", "coord_map", f"no coordinate map for layer '{node.name}' of type {node.op_type} on the "
        "path to its bottoms", hint="give crop_param offsets instead")


def _pool_filter_map(p: Params) -> list[AxisMap]:
    """FilterMap of a pooling_param (kernel_size/stride/pad, or their _h/_w forms)."""
    def pair(name: str, field: str, default: int) -> list[int]:
        if p.has(name + "_h") or p.has(name + "_w"):
            return [int(p.get(name + "_h", default)), int(p.get(name + "_w", default))]
        v: Any = p.get(field, default)
        v = v[0] if isinstance(v, list) else v
        return [int(v)] * 2

    k, s, pad = pair("kernel", "kernel_size", 1), pair("stride", "stride", 1), pair("pad", "pad", 0)
    return [(Fraction(s[i]), Fraction(k[i] - 1, 2) - pad[i]) for i in range(2)]


def coord_map_offsets(origin: OriginGraph, crop: OriginNode) -> list[int]:
    """crop_layer.cpp LayerSetUp: walk back from both bottoms (through each layer's first
    bottom) to their first common blob, map it to each bottom, and read the crop off the map
    from bottom 0 to bottom 1, which must be a whole-pixel shift."""
    producer = {o: n for n in origin.nodes for o in n.outputs}
    err = Params(crop, "crop_param").error

    def back(blob: str) -> OriginNode | None:
        node = producer.get(blob)
        return node if node is not None and node.inputs and node is not crop else None

    path0 = [crop.inputs[0]]
    while (node := back(path0[-1])) is not None:
        path0.append(node.inputs[0])
    inter = crop.inputs[1]
    while inter not in path0:
        node = back(inter)
        if node is None:
            raise err("mode", "coord_map", "its two bottoms share no blob to align them by")
        inter = node.inputs[0]
    maps = []
    for blob in crop.inputs[:2]:
        m = [(Fraction(1), Fraction(0))] * 2
        while blob != inter:
            node = producer[blob]
            m = _compose(m, _layer_map(node, crop))
            blob = node.inputs[0]
        maps.append(m)
    offsets = []
    for scale, shift in _compose(maps[1], _inv(maps[0])):
        if scale != 1 or shift > 0 or shift.denominator != 1:
            raise err("mode", "coord_map", f"bottom 0 maps onto bottom 1 as {scale} x + {shift}, "
                      "not a crop by a whole number of pixels")
        offsets.append(int(-shift))
    return offsets
