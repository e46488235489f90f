"""Resize: N-D nearest, (multi-)linear and cubic resampling with ONNX Resize-19 semantics.

`scales` and `sizes` (ONNX inputs) are attributes here; exactly one is given. Resampling is
separable: each resized axis is done in turn, nearest as a gather and linear/cubic as a
weighted sum of gathered taps, from the coordinate transform and the kernel. Formulas follow
the operator spec (https://onnx.ai/onnx/operators/onnx__Resize.html).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op, every_axis
from .common import NUMERIC
from .shape import check_axes, static_shape

MODES = ("nearest", "linear", "cubic")
COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
ASPECT_POLICIES = ("stretch", "not_larger", "not_smaller")


def resize_plan(shape: Sequence[int], axes: Sequence[int], scales: Sequence[float],
                sizes: Sequence[int], policy: str) -> tuple[list[int], list[float]]:
    """Output dims and per-dim scale factors for the resized ``axes`` (already non-negative)."""
    out, factors = list(shape), [1.0] * len(shape)
    if scales:
        for a, s in zip(axes, scales):
            factors[a] = float(s)
            out[a] = int(math.floor(shape[a] * float(s)))
        return out, factors
    ratios = [sz / shape[a] for a, sz in zip(axes, sizes)]
    if policy == "stretch":
        for a, sz, r in zip(axes, sizes, ratios):
            out[a], factors[a] = int(sz), r
        return out, factors
    common = min(ratios) if policy == "not_larger" else max(ratios)
    for a in axes:
        factors[a] = common
        out[a] = int(common * shape[a] + 0.5)  # round half up, as the spec says
    return out, factors


def _resize_params(ctx: ShapeContext) -> tuple[list[int], list[int], list[float]]:
    shape = static_shape(ctx)
    r = len(shape)
    axes = check_axes(ctx, ctx.attr("axes"), r)
    scales, sizes = ctx.attr("scales"), ctx.attr("sizes")
    if bool(scales) == bool(sizes):
        raise ctx.error("give exactly one of 'scales' and 'sizes'", attr="sizes" if sizes else "scales",
                        hint="give exactly one of scales and sizes (an empty tensor counts as absent)")
    name, given = ("scales", scales) if scales else ("sizes", sizes)
    if len(given) != len(axes):
        raise ctx.error(f"has {len(given)} entries for {len(axes)} resized axes", attr=name,
                        hint="one entry per axis in 'axes' (every axis when axes is absent)")
    if scales and any(s <= 0 for s in scales):
        raise ctx.error(f"{list(scales)} has a scale <= 0", attr="scales",
                        hint="scales must be positive: correct the model's scales")
    for a in axes:
        if shape[a] == 0:
            raise ctx.error(f"axis {a} has size 0 and cannot be resized", attr=name,
                            hint="check the input's shape (--input-shape): an empty axis cannot be resized")
    if ctx.attr("coordinate_transformation_mode") == "tf_crop_and_resize" and \
            len(ctx.attr("roi")) != 2 * len(axes):
        raise ctx.error(f"has {len(ctx.attr('roi'))} entries; tf_crop_and_resize needs "
                        f"[starts..., ends...] for the {len(axes)} resized axes", attr="roi",
                        hint="give roi as [starts..., ends...], one of each per resized axis")
    out, factors = resize_plan(shape, axes, scales, sizes, ctx.attr("keep_aspect_ratio_policy"))
    return axes, out, factors


def _resize_shape(ctx: ShapeContext) -> Any:
    _, out, _ = _resize_params(ctx)
    return tuple(out), ctx.input_dtype(0)


# -- the per-axis pieces -------------------------------------------------------------------
def source_coords(mode: str, out_len: int, in_len: int, scale: float,
                  roi: tuple[float, float]) -> tuple[np.ndarray, np.ndarray | None]:
    """Input coordinate of every output index on one axis, and (tf_crop_and_resize) the
    mask of outputs that fall outside the input and take the extrapolation value."""
    y = np.arange(out_len, dtype=np.float64)
    out_f = scale * in_len  # the spec's fractional output length
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / out_f)
        return offset + (y + 0.5) / scale - 0.5, None
    if mode == "pytorch_half_pixel":
        return ((y + 0.5) / scale - 0.5 if out_len > 1 else np.zeros_like(y)), None
    if mode == "align_corners":
        return (np.zeros_like(y) if out_f == 1 else y * (in_len - 1) / (out_f - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    # tf_crop_and_resize. ONNX's roi is a float32 tensor, and onnxruntime and the reference
    # take its difference and scaled start in float32; so do we, or ties at .5 round apart.
    start, end = np.float32(roi[0]), np.float32(roi[1])
    if out_f == 1:
        x = np.full_like(y, (end - start) * (in_len - 1) / 2 + start * (in_len - 1))
    else:
        x = y * (end - start) * (in_len - 1) / (out_f - 1) + start * (in_len - 1)
    return x, (x < 0) | (x > in_len - 1)


def nearest_index(x: np.ndarray, in_len: int, nearest_mode: str) -> np.ndarray:
    """The input index nearest_mode picks for each coordinate, clamped to the axis."""
    f = np.floor(x)
    frac = x - f
    if nearest_mode == "round_prefer_floor":
        idx = np.where(frac > 0.5, f + 1, f)
    elif nearest_mode == "round_prefer_ceil":
        idx = np.where(frac >= 0.5, f + 1, f)
    elif nearest_mode == "floor":
        idx = f
    else:
        idx = np.ceil(x)
    return np.clip(idx, 0, in_len - 1).astype(np.intp)


def _kernel(t: np.ndarray, mode: str, a: float) -> np.ndarray:
    u = np.abs(t)
    if mode == "linear":
        return np.maximum(1.0 - u, 0.0)
    near = ((a + 2) * u - (a + 3)) * u * u + 1  # Keys cubic, |t| <= 1
    far = ((a * u - 5 * a) * u + 8 * a) * u - 4 * a  # 1 < |t| < 2
    return np.where(u <= 1, near, np.where(u < 2, far, 0.0))


def interp_taps(x: np.ndarray, in_len: int, mode: str, scale: float, *, cubic_a: float,
                exclude_outside: bool, antialias: bool) -> tuple[np.ndarray, np.ndarray]:
    """The input indices (out x taps) and weights that resample one axis at coordinates ``x``.

    Taps past either end repeat the edge sample, unless ``exclude_outside`` drops them
    and renormalises. ``antialias`` stretches the kernel by 1/scale when downscaling.
    """
    support = 1.0 if mode == "linear" else 2.0
    stretch = min(scale, 1.0) if antialias else 1.0
    radius = support / stretch
    lo = np.floor(x - radius)
    taps = lo[:, None] + np.arange(int(math.ceil(2 * radius)) + 2)[None, :]
    w = _kernel((taps - x[:, None]) * stretch, mode, cubic_a)
    if antialias:
        w = w / w.sum(axis=1, keepdims=True)
    if exclude_outside:
        w = np.where((taps < 0) | (taps > in_len - 1), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(taps, 0, in_len - 1).astype(np.intp), w


def _apply_taps(y: np.ndarray, axis: int, taps: np.ndarray, w: np.ndarray) -> np.ndarray:
    """sum over k of y[..., taps[:, k], ...] * w[:, k] along ``axis`` (memory: one output)."""
    bshape = [1] * y.ndim
    bshape[axis] = -1
    out = np.zeros(y.shape[:axis] + (taps.shape[0],) + y.shape[axis + 1:])
    for k in range(taps.shape[1]):
        if np.any(w[:, k]):
            out += np.take(y, taps[:, k], axis=axis) * w[:, k].reshape(bshape)
    return out


def _resize(x: np.ndarray, *, mode: str, coordinate_transformation_mode: str, nearest_mode: str,
            cubic_coeff_a: float, exclude_outside: int, extrapolation_value: float,
            antialias: int, axes: tuple[int, ...], keep_aspect_ratio_policy: str,
            scales: tuple[float, ...], sizes: tuple[int, ...], roi: tuple[float, ...]) -> np.ndarray:
    r = x.ndim
    axes_n = [a % r for a in axes]
    out, factors = resize_plan(x.shape, axes_n, scales, sizes, keep_aspect_ratio_policy)
    crop = coordinate_transformation_mode == "tf_crop_and_resize"
    y = x if mode == "nearest" else x.astype(np.float64)
    masks = []
    for k, a in enumerate(axes_n):
        window = (roi[k], roi[len(axes_n) + k]) if crop else (0.0, 1.0)
        if out[a] == x.shape[a] and factors[a] == 1.0 and window == (0.0, 1.0):
            continue  # an identity on this axis
        coords, mask = source_coords(coordinate_transformation_mode, out[a], x.shape[a],
                                     factors[a], window)
        if mode == "nearest":
            y = np.take(y, nearest_index(coords, x.shape[a], nearest_mode), axis=a)
        else:
            taps, w = interp_taps(coords, x.shape[a], mode, factors[a], cubic_a=cubic_coeff_a,
                                  exclude_outside=bool(exclude_outside), antialias=bool(antialias))
            y = _apply_taps(y, a, taps, w)
        if mask is not None:
            masks.append(mask.reshape((1,) * a + (-1,) + (1,) * (r - a - 1)))
    if masks:
        y = np.where(np.logical_or.reduce(np.broadcast_arrays(*masks)), extrapolation_value, y)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        y = np.clip(np.rint(y), info.min, info.max)
    return np.asarray(y).astype(x.dtype)


(
    define_op("Resize")
    .doc("Resample x to new sizes on `axes` (nearest, N-linear or cubic), ONNX Resize-19 rules.")
    .input("x", "T").output("y", "T")
    .param("mode", "str", "nearest", allowed=MODES)
    .param("coordinate_transformation_mode", "str", "half_pixel", allowed=COORD_MODES)
    .param("nearest_mode", "str", "round_prefer_floor", allowed=NEAREST_MODES)
    .param("cubic_coeff_a", "float", -0.75)
    .param("exclude_outside", "int", 0, allowed=(0, 1))
    .param("extrapolation_value", "float", 0.0)
    .param("antialias", "int", 0, allowed=(0, 1), doc="linear/cubic: widen the kernel when shrinking")
    .param("axes", "ints", fill=every_axis(0), doc="the axes scales/sizes refer to; absent: all")
    .param("keep_aspect_ratio_policy", "str", "stretch", allowed=ASPECT_POLICIES)
    .param("scales", "floats", (), doc="one factor per resized axis (ONNX input); or give sizes")
    .param("sizes", "ints", (), minimum=0, doc="one output size per resized axis (ONNX input)")
    .param("roi", "floats", (), doc="tf_crop_and_resize: [starts..., ends...] normalised")
    .type_param("T", NUMERIC)
    .shape_fn(_resize_shape)
    .compute(_resize)
)
