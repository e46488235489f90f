"""ONNX mappings: Concat, Split, Slice, Pad, the Gather and Scatter families.

Semantics: https://onnx.ai/onnx/operators/. Versions whose meaning differs get their own
mapping: Concat-1 (axis defaults to 1) / -4 (axis required); Split-1 (split attribute or
second input) / -2 (attribute) / -13 (input) / -18 (num_outputs, the last piece smaller);
Slice-1 (attributes) / -10 (inputs, with steps); Pad-1 ('paddings') / -2 ('pads') / -11 (pads
and constant_value inputs) / -18 (axes input); GatherND-12 (batch_dims); Scatter-9 (the old
name of ScatterElements); CenterCropPad-18 (Slice + Pad); Compress-9 (a Gather, with a constant
condition). Shape-like inputs must be constant and become IR attributes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.ops.tensor import split_sizes
from ...parsers.origin import OriginNode
from ..context import MapContext
from ..registry import mapping
from .dynamic import dynamic, run_time_operands
from .elementwise import ONNX, checked_attrs, one_to_one, required_input
from .shape import const_ints, const_scalar


# -- Concat --------------------------------------------------------------------------------
@mapping(ONNX, "Concat", since_opset=1)
def concat_v1(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("axis",))
    ins = [required_input(g, i, f"input {i}") for i in range(g.num_inputs)]
    if not ins:
        raise g.error("needs at least one input")
    return g.op("Concat", ins, axis=int(node.get_attr("axis")))


one_to_one("Concat", 4, attrs=("axis",), num_inputs=-1)


# -- Split ---------------------------------------------------------------------------------
def _split(node: OriginNode, g: MapContext, split: tuple[int, ...], num_outputs: int | None,
           *, even: bool) -> Any:
    """Emit Split; without ``split``, the pieces come from the output count (``even``: they
    must be equal, as before opset 18)."""
    x = required_input(g, 0, "input")
    rank = len(x.shape)
    axis = int(node.get_attr("axis"))
    if not -rank <= axis < rank:
        raise g.error(f"= {axis} is out of range for rank {rank}", attr="axis")
    dim = x.shape[axis]
    if not isinstance(dim, int):
        raise g.error(f"axis {axis} has symbolic size {dim!r}", hint="fix the input shapes first")
    n = num_outputs or len(node.outputs)
    if not split:
        if even and dim % n:
            raise g.error(f"the axis of size {dim} does not split evenly into {n} outputs",
                          hint="give 'split' sizes")
        sizes = split_sizes(dim, (), n)
        if isinstance(sizes, str):
            raise g.error(sizes, attr="num_outputs")
        split = tuple(sizes)
    if len(split) != len(node.outputs):
        raise g.error(f"{list(split)} has {len(split)} pieces for {len(node.outputs)} outputs",
                      attr="split")
    out = g.op("Split", [x], axis=axis, split=split)
    return out if isinstance(out, tuple) else (out,)


@mapping(ONNX, "Split", since_opset=1)
def split_v1(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("axis", "split"))
    split = const_ints(g, 1, "split") if g.has_input(1) else tuple(a.get("split", ()))
    return _split(node, g, split, None, even=True)


@mapping(ONNX, "Split", since_opset=2)
def split_v2(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("axis", "split"))
    return _split(node, g, tuple(a.get("split", ())), None, even=True)


@mapping(ONNX, "Split", since_opset=13)
def split_v13(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("axis",))
    split = const_ints(g, 1, "split") if g.has_input(1) else ()
    return _split(node, g, split, None, even=True)


@mapping(ONNX, "Split", since_opset=18)
def split_v18(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("axis", "num_outputs"))
    split = const_ints(g, 1, "split") if g.has_input(1) else ()
    if bool(split) == ("num_outputs" in a):
        raise g.error("give exactly one of the 'split' input and the 'num_outputs' attribute")
    num = a.get("num_outputs")
    if num is not None and int(num) != len(node.outputs):
        raise g.error(f"= {num} but the node has {len(node.outputs)} outputs", attr="num_outputs")
    return _split(node, g, split, num, even=False)


# -- Slice ---------------------------------------------------------------------------------
@mapping(ONNX, "Slice", since_opset=1)
def slice_v1(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("starts", "ends", "axes"))
    for req in ("starts", "ends"):
        if req not in a:
            raise g.error("required but absent", attr=req)
    return g.op("Slice", [required_input(g, 0, "data")], **a)


@mapping(ONNX, "Slice", since_opset=10)
def slice_v10(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ())
    if run_time_operands(g, [1, 2, 3, 4]):
        return dynamic(g, "Slice", [required_input(g, 0, "data")],
                       [required_input(g, 1, "starts"), required_input(g, 2, "ends"), g.input(3), g.input(4)])
    attrs = {"starts": const_ints(g, 1, "starts"), "ends": const_ints(g, 2, "ends")}
    if g.has_input(3):
        attrs["axes"] = const_ints(g, 3, "axes")
    if g.has_input(4):
        attrs["steps"] = const_ints(g, 4, "steps")
    return g.op("Slice", [required_input(g, 0, "data")], **attrs)


# -- Pad -----------------------------------------------------------------------------------
def _pad_value(g: MapContext, i: int) -> float:
    return float(const_scalar(g, i, "constant_value")) if g.has_input(i) else 0.0


@mapping(ONNX, "Pad", since_opset=1)
def pad_v1(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("paddings", "mode", "value"))
    if "paddings" not in a:
        raise g.error("required but absent", attr="paddings")
    return g.op("Pad", [required_input(g, 0, "data")], pads=a["paddings"],
                mode=a["mode"], value=float(a["value"]))


@mapping(ONNX, "Pad", since_opset=2)
def pad_v2(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("pads", "mode", "value"))
    if "pads" not in a:
        raise g.error("required but absent", attr="pads")
    return g.op("Pad", [required_input(g, 0, "data")], **a)


@mapping(ONNX, "Pad", since_opset=11)
def pad_v11(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("mode",))
    return g.op("Pad", [required_input(g, 0, "data")], pads=const_ints(g, 1, "pads"),
                value=_pad_value(g, 2), **a)


@mapping(ONNX, "Pad", since_opset=18)
def pad_v18(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("mode",))
    axes = const_ints(g, 3, "axes") if g.has_input(3) else ()
    return g.op("Pad", [required_input(g, 0, "data")], pads=const_ints(g, 1, "pads"),
                value=_pad_value(g, 2), axes=axes, **a)


# -- Gather / Scatter ----------------------------------------------------------------------
one_to_one("Gather", 1, attrs=("axis",), num_inputs=2)
one_to_one("GatherElements", 11, attrs=("axis",), num_inputs=2)
one_to_one("GatherND", 11, num_inputs=2)
one_to_one("GatherND", 12, attrs=("batch_dims",), num_inputs=2)
one_to_one("ScatterND", 11, num_inputs=3)
one_to_one("ScatterND", 16, attrs=("reduction",), num_inputs=3)
one_to_one("Scatter", 9, ir_op="ScatterElements", attrs=("axis",), num_inputs=3)
one_to_one("ScatterElements", 11, attrs=("axis",), num_inputs=3)
one_to_one("ScatterElements", 16, attrs=("axis", "reduction"), num_inputs=3)


# -- CenterCropPad -------------------------------------------------------------------------
@mapping(ONNX, "CenterCropPad", since_opset=18)
def center_crop_pad(node: OriginNode, g: MapContext) -> Any:
    # each named axis is cropped (or zero-padded) to its target size around the centre;
    # the extra element of an odd difference goes to the end for both
    a = checked_attrs(node, g, ("axes",))
    x = required_input(g, 0, "input_data")
    rank = len(x.shape)
    target = const_ints(g, 1, "shape")
    axes = tuple(int(v) for v in a.get("axes", range(rank)))
    if len(axes) != len(target):
        raise g.error(f"input 1 (shape) has {len(target)} values for {len(axes)} axes")
    starts, ends, crop_axes = [], [], []
    pads = [0] * (2 * rank)
    for ax, t in zip(axes, target):
        if not -rank <= ax < rank:
            raise g.error(f"{ax} is out of range for rank {rank}", attr="axes")
        ax %= rank
        dim = x.shape[ax]
        if t < dim:
            starts.append((dim - t) // 2)
            ends.append((dim - t) // 2 + t)
            crop_axes.append(ax)
        elif t > dim:
            pads[ax] = (t - dim) // 2
            pads[rank + ax] = t - dim - (t - dim) // 2
    y = x
    if crop_axes:
        y = g.op("Slice", [y], starts=tuple(starts), ends=tuple(ends), axes=tuple(crop_axes))
    if any(pads):
        y = g.op("Pad", [y], pads=tuple(pads))
    return y if y is not x else g.op("Identity", [x])


# -- Compress ------------------------------------------------------------------------------
@mapping(ONNX, "Compress", since_opset=9)
def compress(node: OriginNode, g: MapContext) -> Any:
    # with a constant condition Compress is a Gather of the selected positions; without
    # 'axis' it selects from the flattened input
    a = checked_attrs(node, g, ("axis",))
    x = required_input(g, 0, "input")
    if run_time_operands(g, [1]):  # the size of the result is known at run time only
        cond_v = required_input(g, 1, "condition")
        if cond_v.dtype != "bool":
            cond_v = g.op("Cast", [cond_v], to="bool")
        return g.op("Compress", [x, cond_v], axis=int(a["axis"]) if "axis" in a else None)
    cond = g.require_const(1, "condition").reshape(-1).astype(bool)
    if "axis" in a:
        rank = len(x.shape)
        axis = int(a["axis"])
        if not -rank <= axis < rank:
            raise g.error(f"= {axis} is out of range for rank {rank}", attr="axis")
        dim = x.shape[axis]
    else:
        x = g.op("Reshape", [x], shape=(-1,))
        axis, dim = 0, x.shape[0]
    if cond[dim:].any():
        raise g.error(f"input 1 (condition) selects position {int(cond[dim:].argmax()) + dim}, "
                      f"past the axis size {dim}")
    picked = np.flatnonzero(cond[:dim]).astype(np.int64)
    return g.op("Gather", [x, g.constant(picked)], axis=axis)
