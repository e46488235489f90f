"""ONNX mappings: Resize and the legacy Upsample, onto the IR's Resize.

Semantics: https://onnx.ai/onnx/operators/onnx__Resize.html. Versions whose meaning differs
get their own mapping: Upsample-7 (scales attribute) and -9 (scales input), and Resize-10,
all with asymmetric coordinates and the 'simple' nearest rounding onnxruntime uses there
(floor when enlarging, ceil when shrinking); Resize-11 (roi/scales/sizes inputs, coordinate
modes) and -13 (roi and scales optional); Resize-18 (antialias, axes,
keep_aspect_ratio_policy; half_pixel_symmetric from 19). scales/sizes (and roi, for
tf_crop_and_resize) must be constant; they become IR attributes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import OriginNode
from ..context import MapContext
from ..registry import mapping
from .dynamic import dynamic, run_time_operands
from .elementwise import ONNX, checked_attrs, required_input

RESIZE_11_ATTRS = ("coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                   "extrapolation_value", "mode", "nearest_mode")
RESIZE_18_ATTRS = RESIZE_11_ATTRS + ("antialias", "axes", "keep_aspect_ratio_policy")


def _floats(g: MapContext, i: int, what: str) -> tuple[float, ...]:
    """Optional constant input ``i`` as floats; an empty tensor or absent input gives ()."""
    if not g.has_input(i):
        return ()
    return tuple(float(v) for v in g.require_const(i, what).reshape(-1))


def _legacy(node: OriginNode, g: MapContext, x: Value, scales: tuple[float, ...], mode: str) -> Any:
    """Upsample / Resize-10: asymmetric coordinates; nearest floors when enlarging and ceils
    when shrinking (onnxruntime's rule); axes of the two kinds are resized one after the other."""
    if len(scales) != len(x.shape):
        raise g.error(f"has {len(scales)} entries for an input of rank {len(x.shape)}",
                      attr="scales", hint="give one scale per dim")
    if mode not in ("nearest", "linear", "bilinear"):
        raise g.error(f"'{mode}' is not nearest or linear", attr="mode")
    mode = "linear" if mode == "bilinear" else mode
    if mode == "linear":
        return g.op("Resize", [x], mode="linear", coordinate_transformation_mode="asymmetric",
                    scales=scales)
    y = x
    for pick, rounding in ((lambda s: s < 1, "ceil"), (lambda s: s >= 1, "floor")):
        axes = tuple(i for i, s in enumerate(scales) if pick(s) and s != 1)
        if axes:
            y = g.op("Resize", [y], mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode=rounding, axes=axes, scales=tuple(scales[a] for a in axes))
    return y if y is not x else g.op("Identity", [x])


@mapping(ONNX, "Upsample", since_opset=7)
def upsample_v7(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("scales", "mode"))
    if "scales" not in a:
        raise g.error("required but absent", attr="scales")
    return _legacy(node, g, required_input(g, 0, "X"), tuple(float(s) for s in a["scales"]),
                   str(a["mode"]))


@mapping(ONNX, "Upsample", since_opset=9)
def upsample_v9(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("mode",))
    return _legacy(node, g, required_input(g, 0, "X"), _floats(g, 1, "scales"),
                   str(a["mode"]))


@mapping(ONNX, "Resize", since_opset=10)
def resize_v10(node: OriginNode, g: MapContext) -> Any:
    a = checked_attrs(node, g, ("mode",))
    return _legacy(node, g, required_input(g, 0, "X"), _floats(g, 1, "scales"),
                   str(a["mode"]))


def _resize(node: OriginNode, g: MapContext, known: tuple[str, ...]) -> Any:
    a = checked_attrs(node, g, known)
    x = required_input(g, 0, "X")
    if a.get("coordinate_transformation_mode") == "tf_half_pixel_for_nn":
        raise g.unsupported("coordinate_transformation_mode 'tf_half_pixel_for_nn' (Resize-11 "
                            "only) has no IR equivalent",
                            hint="re-export with opset 13+ (half_pixel or asymmetric)")
    if run_time_operands(g, [2, 3]):
        return _resize_dynamic(node, g, a, x)
    scales = _floats(g, 2, "scales")
    sizes = tuple(int(v) for v in g.require_const(3, "sizes").reshape(-1)) if g.has_input(3) else ()
    if not scales and not sizes:
        raise g.error("neither scales (input 2) nor sizes (input 3) is given",
                      hint="Resize needs one of them")
    if scales and sizes:
        raise g.error("both scales (input 2) and sizes (input 3) are given; give one")
    attrs: dict[str, Any] = {**a, "scales": scales, "sizes": sizes}
    if "axes" in attrs:
        attrs["axes"] = tuple(int(v) for v in attrs["axes"])
    if a.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        attrs["roi"] = _floats(g, 1, "roi")
        n = len(attrs.get("axes", ())) or len(x.shape)
        if len(attrs["roi"]) != 2 * n:
            raise g.error(f"input 1 (roi) has {len(attrs['roi'])} values; tf_crop_and_resize "
                          f"needs 2 per resized axis ({2 * n})")
    for k in ("cubic_coeff_a", "extrapolation_value"):
        if k in attrs:
            attrs[k] = float(np.float32(attrs[k]))
    return g.op("Resize", [x], **attrs)


def _resize_dynamic(node: OriginNode, g: MapContext, a: dict[str, Any], x: Value) -> Any:
    """Resize whose scales or sizes are computed at run time (an empty one counts as absent)."""
    attrs = {k: (tuple(int(v) for v in a[k]) if k == "axes" else a[k]) for k in a}
    for k in ("cubic_coeff_a", "extrapolation_value"):
        if k in attrs:
            attrs[k] = float(np.float32(attrs[k]))
    crop = a.get("coordinate_transformation_mode") == "tf_crop_and_resize"
    ops: list[Value | None] = [g.input(1) if crop else None]  # roi means something there only
    for i in (2, 3):
        v, data = g.input(i), g.const(i)
        ops.append(None if v is None or (data is not None and data.size == 0) else v)
    return dynamic(g, "Resize", [x], ops, **attrs)


@mapping(ONNX, "Resize", since_opset=11)
def resize_v11(node: OriginNode, g: MapContext) -> Any:
    return _resize(node, g, RESIZE_11_ATTRS)


@mapping(ONNX, "Resize", since_opset=18)
def resize_v18(node: OriginNode, g: MapContext) -> Any:
    return _resize(node, g, RESIZE_18_ATTRS)
