"""Pooling: MaxPool, AveragePool, LpPool and their global forms (NC + 1-3 spatial axes).

Same attribute conventions as ``conv.py``: explicit ``pads`` (begins, then ends), no
``auto_pad``; absent ``strides``/``dilations``/``pads`` are filled with 1/1/0 when the node is
created, so every node holds them. ``kernel_shape`` is required (pooling has no weights to
infer it from).

Ceil mode follows the onnx reference and PyTorch: the output length is rounded up, but a
window that would start inside the end padding is dropped; the part of a window past the
padded input is ignored (not counted, even with ``count_include_pad``).

The kernels loop over kernel taps (at most a few dozen), never over channels or pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import InterpretError
from ..opdef import OpDef, ShapeContext, define_op, per_spatial_axis
from .common import FLOATS
from .conv import Ints, check_spatial, out_size, pad_spatial, spatial_out, taps, windows


def _pool_shape(ctx: ShapeContext) -> tuple[list[Any], Ints, Ints, Ints, Ints]:
    xs = ctx.input_shape(0)
    nsp = len(xs) - 2
    k, s, d, p = check_spatial(ctx, nsp, kernel=ctx.attr("kernel_shape"), strides=ctx.attr("strides"),
                               dilations=ctx.attr("dilations"), pads=ctx.attr("pads"))
    eff = [(k[i] - 1) * d[i] + 1 for i in range(nsp)]
    for i in range(nsp):
        if p[i] >= eff[i] or p[i + nsp] >= eff[i]:
            raise ctx.error(
                f"= {list(p)}: a pad of spatial axis {i} is as large as the window ({eff[i]}); "
                "some windows would hold only padding",
                attr="pads", hint="pads must be smaller than the (dilated) kernel",
            )
    ceil = bool(ctx.attr("ceil_mode"))
    out = [xs[0], xs[1], *spatial_out(ctx, xs[2:], k, s, d, p, ceil)]
    return out, k, s, d, p


def _geometry(x: np.ndarray, kernel_shape: Ints, strides: Ints, dilations: Ints,
              pads: Ints, ceil_mode: int) -> tuple[Ints, Ints, Ints, Ints, list[int], list[int]]:
    """The attributes, output spatial shape, and the extra end padding ceil mode needs."""
    nsp = x.ndim - 2
    k, s, d, p = kernel_shape, strides, dilations, pads
    out_sp, extra = [], []
    for i in range(nsp):
        o = out_size(x.shape[2 + i], k[i], s[i], d[i], p[i], p[i + nsp], bool(ceil_mode))
        out_sp.append(o)
        need = (o - 1) * s[i] + (k[i] - 1) * d[i] + 1
        extra.append(max(0, need - (x.shape[2 + i] + p[i] + p[i + nsp])))
    return k, s, d, p, out_sp, extra


def _work_dtype(dt: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


# -- MaxPool ---------------------------------------------------------------------------
def _maxpool_shape(ctx: ShapeContext) -> Any:
    out, *_ = _pool_shape(ctx)
    res = [(tuple(out), ctx.input_dtype(0))]
    if ctx.attr("output_indices"):
        res.append((tuple(out), "i64"))
    return res


def _separable_max(xp: np.ndarray, k: Ints, s: Ints, d: Ints, out_sp: Sequence[int]) -> np.ndarray:
    """The window maximum of the padded ``xp``, one spatial axis at a time (the maximum over a
    box is the maximum over each axis in turn): k1 + k2 + ... passes instead of k1 * k2 * ...,
    the first ones over whole contiguous rows (ResNet's 3x3/2 MaxPool: 1.1 -> 0.6 ms)."""
    y = xp
    for ax in range(len(k)):
        def tap(t: int, ax: int = ax) -> tuple[slice, ...]:
            lo = t * d[ax]
            return (slice(None),) * (2 + ax) + (slice(lo, lo + (out_sp[ax] - 1) * s[ax] + 1, s[ax]),)
        acc = np.array(y[tap(0)])  # our own buffer: the maximum goes in place
        for t in range(1, k[ax]):
            np.maximum(acc, y[tap(t)], out=acc)
        y = acc
    return y


def _maxpool(x: np.ndarray, *, kernel_shape: Ints, strides: Ints, dilations: Ints,
             pads: Ints, ceil_mode: int, storage_order: int, output_indices: bool) -> Any:
    k, s, d, p, out_sp, extra = _geometry(x, kernel_shape, strides, dilations, pads, ceil_mode)
    nsp = len(k)
    xw = x.astype(_work_dtype(x.dtype), copy=False)
    xp = pad_spatial(xw, p, -np.inf, extra)
    y = _separable_max(xp, k, s, d, out_sp).astype(x.dtype, copy=False)
    if not output_indices:
        return y
    win = windows(xp, k, s, d, out_sp)
    flat = win.reshape(*win.shape[: 2 + nsp], -1)
    arg = np.argmax(flat, axis=-1)  # first maximum in window order, as the onnx reference
    tap = np.unravel_index(arg, k)
    in_sp = x.shape[2:]
    # row-major (storage_order 0) or column-major (1) strides of the spatial block
    if storage_order == 0:
        sstr = [int(np.prod(in_sp[i + 1:])) for i in range(nsp)]
    else:
        sstr = [int(np.prod(in_sp[:i])) for i in range(nsp)]
    n, c = x.shape[:2]
    idx = (np.arange(n * c, dtype=np.int64).reshape(n, c, *([1] * nsp)) * int(np.prod(in_sp)))
    for i in range(nsp):
        o = np.arange(out_sp[i], dtype=np.int64).reshape([1, 1] + [-1 if j == i else 1
                                                                   for j in range(nsp)])
        coord = o * s[i] + tap[i].astype(np.int64) * d[i] - p[i]
        idx = idx + coord * sstr[i]
    return y, idx


def _sliding_window(op: OpDef) -> OpDef:
    """Declare the window parameters that MaxPool, AveragePool and LpPool share, once."""
    return (
        op
    .param("kernel_shape", "ints", doc="window shape, one per spatial axis")
    .param("strides", "ints", fill=per_spatial_axis(1), doc="one per spatial axis; absent = all 1")
    .param("dilations", "ints", fill=per_spatial_axis(1), doc="one per spatial axis; absent = all 1")
    .param("pads", "ints", fill=per_spatial_axis(0, entries=2), doc="begins then ends; absent = no padding")
    .param("ceil_mode", "int", default=0, allowed=(0, 1), doc="round the output size up")
    )


(
    _sliding_window(
        define_op("MaxPool")
        .doc("max over sliding windows; optional second output Indices: the flat index of each "
             "maximum in X (row-major, or column-major over the spatial axes if storage_order=1)")
        .input("X", "T").output("Y", "T").output("Indices", "i64", optional=True)
    )
    .param("storage_order", "int", default=0, allowed=(0, 1),
           doc="layout the Indices output counts in (0 row-major, 1 column-major)")
    .param("output_indices", "bool", default=False, doc="whether the node has the Indices output")
    .type_param("T", FLOATS + ("i8", "u8"))
    .shape_fn(_maxpool_shape)
    .compute(_maxpool)
)


# -- AveragePool / LpPool ----------------------------------------------------------------
def _same_pool_shape(ctx: ShapeContext) -> Any:
    out, *_ = _pool_shape(ctx)
    return tuple(out), ctx.input_dtype(0)


def _window_sum(xp: np.ndarray, k: Ints, s: Ints, d: Ints, out_sp: list[int]) -> np.ndarray:
    acc: np.ndarray | None = None
    for _, view in taps(xp, k, s, d, out_sp):
        acc = view.copy() if acc is None else acc + view
    assert acc is not None
    return acc


def _averagepool(x: np.ndarray, *, kernel_shape: Ints, strides: Ints,
                 dilations: Ints, pads: Ints, ceil_mode: int,
                 count_include_pad: int) -> np.ndarray:
    k, s, d, p, out_sp, extra = _geometry(x, kernel_shape, strides, dilations, pads, ceil_mode)
    nsp = len(k)
    wdt = _work_dtype(x.dtype)
    total = _window_sum(pad_spatial(x.astype(wdt, copy=False), p, 0, extra), k, s, d, out_sp)
    # the divisor: how many counted positions each window covers (a spatial-only count)
    ones = np.ones((1, 1, *x.shape[2:]), wdt)
    if count_include_pad:
        mask = pad_spatial(ones, p, 1.0)
        mask = pad_spatial(mask, (0,) * (2 * nsp), 0.0, extra)
    else:
        mask = pad_spatial(ones, p, 0.0, extra)
    count = _window_sum(mask, k, s, d, out_sp)
    return (total / count).astype(x.dtype)


(
    _sliding_window(
        define_op("AveragePool")
        .doc("mean over sliding windows; count_include_pad=1 counts the explicit pads in the divisor")
        .input("X", "T").output("Y", "T")
    )
    .param("count_include_pad", "int", default=0, allowed=(0, 1),
           doc="count padded positions in the divisor")
    .type_param("T", FLOATS)
    .shape_fn(_same_pool_shape)
    .compute(_averagepool)
)


def _lppool(x: np.ndarray, *, kernel_shape: Ints, strides: Ints, dilations: Ints,
            pads: Ints, ceil_mode: int, p: int) -> np.ndarray:
    k, s, d, pd, out_sp, extra = _geometry(x, kernel_shape, strides, dilations, pads, ceil_mode)
    wdt = _work_dtype(x.dtype)
    xp = pad_spatial(np.abs(x.astype(wdt, copy=False)) ** p, pd, 0, extra)
    return (_window_sum(xp, k, s, d, out_sp) ** (1.0 / p)).astype(x.dtype)


(
    _sliding_window(
        define_op("LpPool")
        .doc("(sum over each window of |x|^p)^(1/p); padding contributes 0")
        .input("X", "T").output("Y", "T")
    )
    .param("p", "int", default=2, minimum=1, doc="the norm's order")
    .type_param("T", FLOATS)
    .shape_fn(_same_pool_shape)
    .compute(_lppool)
)


# -- global pools ------------------------------------------------------------------------
def _global_shape(ctx: ShapeContext) -> Any:
    xs = ctx.input_shape(0)
    if len(xs) < 3:
        raise ctx.error(f"input has rank {len(xs)}; it needs N, C and at least one spatial axis",
                        hint="check the input's shape (--input-shape) and the layer before: pooling takes "
                             "(N, C, spatial...) tensors")
    return (xs[0], xs[1], *([1] * (len(xs) - 2))), ctx.input_dtype(0)


def _spatial_axes(x: np.ndarray) -> tuple[int, ...]:
    return tuple(range(2, x.ndim))


def _global_lp(x: np.ndarray, *, p: int) -> np.ndarray:
    xw = np.abs(x.astype(_work_dtype(x.dtype), copy=False))
    return (np.sum(xw**p, axis=_spatial_axes(x), keepdims=True) ** (1.0 / p)).astype(x.dtype)


(
    define_op("GlobalAveragePool")
    .doc("mean over all spatial axes (kept as size 1)")
    .input("X", "T").output("Y", "T")
    .type_param("T", FLOATS)
    .shape_fn(_global_shape)
    .compute(lambda x: np.mean(x, axis=_spatial_axes(x), keepdims=True,
                               dtype=_work_dtype(x.dtype)).astype(x.dtype))
)

(
    define_op("GlobalMaxPool")
    .doc("max over all spatial axes (kept as size 1)")
    .input("X", "T").output("Y", "T")
    .type_param("T", FLOATS)
    .shape_fn(_global_shape)
    .compute(lambda x: np.max(x, axis=_spatial_axes(x), keepdims=True))
)

(
    define_op("GlobalLpPool")
    .doc("(sum over all spatial axes of |x|^p)^(1/p) (kept as size 1)")
    .input("X", "T").output("Y", "T")
    .param("p", "int", default=2, minimum=1, doc="the norm's order")
    .type_param("T", FLOATS)
    .shape_fn(_global_shape)
    .compute(_global_lp)
)


# -- RoiAlign -------------------------------------------------------------------------------------
def _roialign_shape(ctx: ShapeContext) -> Any:
    xs, rs, bs = ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2)
    if len(xs) != 4:
        raise ctx.error(f"X has shape {list(xs)}; RoiAlign takes (N, C, H, W)",
                        hint="check the input's shape (--input-shape) and the layer before")
    if len(rs) != 2 or rs[1] != 4:
        raise ctx.error(f"rois has shape {list(rs)}; it must be (num_rois, 4): x1, y1, x2, y2",
                        hint="give rois as (num_rois, 4) boxes")
    if len(bs) != 1 or (isinstance(bs[0], int) and isinstance(rs[0], int) and bs[0] != rs[0]):
        raise ctx.error(f"batch_indices has shape {list(bs)}; it must be ({rs[0]},)",
                        hint="give one batch index per roi")
    return (rs[0], xs[1], ctx.attr("output_height"), ctx.attr("output_width")), ctx.input_dtype(0)


def _bilinear_axis(start: float, bin_size: float, pooled: int, grid: int,
                   size: int) -> tuple[np.ndarray, ...]:
    """Sample positions along one axis (pooled, grid): valid mask, low/high index, weights of
    low and high; the clamping rules of the onnx reference / onnxruntime."""
    p = np.arange(pooled)[:, None]
    i = np.arange(grid)[None, :]
    pos = start + p * bin_size + (i + 0.5) * bin_size / grid
    valid = (pos >= -1.0) & (pos <= size)
    pos = np.maximum(pos, 0.0)
    low = np.floor(pos).astype(np.int64)
    edge = low >= size - 1
    low = np.where(edge, size - 1, low)
    high = np.where(edge, size - 1, low + 1)
    pos = np.where(edge, low, pos)
    frac = pos - low
    return valid, low, high, 1.0 - frac, frac


def _roi_align(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, *,
               coordinate_transformation_mode: str, mode: str, output_height: int,
               output_width: int, sampling_ratio: int, spatial_scale: float) -> np.ndarray:
    wdt = _work_dtype(x.dtype)
    xw = x.astype(wdt, copy=False)
    _, c, h, w = x.shape
    half = coordinate_transformation_mode == "half_pixel"
    out = np.zeros((rois.shape[0], c, output_height, output_width), wdt)
    for r in range(rois.shape[0]):  # rois differ in grid size; everything inside is vectorised
        x1, y1, x2, y2 = (float(v) * spatial_scale - (0.5 if half else 0.0) for v in rois[r])
        rw, rh = x2 - x1, y2 - y1
        if not half:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / output_height, rw / output_width
        gh = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rh / output_height))
        gw = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rw / output_width))
        if gh <= 0 or gw <= 0:
            continue
        vy, yl, yh, wyl, wyh = _bilinear_axis(y1, bh, output_height, gh, h)
        vx, xl, xh, wxl, wxh = _bilinear_axis(x1, bw, output_width, gw, w)
        feat = xw[int(batch_indices[r])]
        mask = (vy[:, :, None, None] & vx[None, None]).astype(wdt)  # (PH, GH, PW, GW)
        terms = []
        for yi, wy in ((yl, wyl), (yh, wyh)):
            rows = feat[:, yi]  # (C, PH, GH, W)
            for xi, wx in ((xl, wxl), (xh, wxh)):
                wgt = wy[:, :, None, None] * wx[None, None] * mask
                terms.append(rows[:, :, :, xi] * wgt)  # (C, PH, GH, PW, GW)
        if mode == "avg":
            out[r] = sum(terms).sum(axis=(2, 4)) / max(gh * gw, 1)
        else:  # the reference's max: over samples of the largest weighted corner
            out[r] = np.maximum.reduce(terms).max(axis=(2, 4))
    return out.astype(x.dtype, copy=False)


(
    define_op("RoiAlign")
    .doc("bilinear ROI align: each roi (x1, y1, x2, y2, scaled by spatial_scale) of image "
         "batch_indices[r] cut into output_height x output_width bins, each the avg (or max) of "
         "sampling_ratio^2 bilinear samples (0 = adaptive, ceil(roi size / bins))")
    .input("X", "T").input("rois", "T").input("batch_indices", "i64").output("Y", "T")
    .param("coordinate_transformation_mode", "str", default="half_pixel",
           allowed=("half_pixel", "output_half_pixel"))
    .param("mode", "str", default="avg", allowed=("avg", "max"))
    .param("output_height", "int", default=1, minimum=1)
    .param("output_width", "int", default=1, minimum=1)
    .param("sampling_ratio", "int", default=0, minimum=0)
    .param("spatial_scale", "float", default=1.0)
    .type_param("T", FLOATS)
    .shape_fn(_roialign_shape)
    .compute(_roi_align)
)


# -- MaxUnpool ------------------------------------------------------------------------------------
def _maxunpool_shape(ctx: ShapeContext) -> Any:
    xs, ids = ctx.input_shape(0), ctx.input_shape(1)
    if tuple(ids) != tuple(xs):
        raise ctx.error(f"indices I {list(ids)} must have X's shape {list(xs)}",
                        hint="give indices of X's shape (the MaxPool that made them)")
    nsp = len(xs) - 2
    k, s, _, p = check_spatial(ctx, nsp, kernel=ctx.attr("kernel_shape"), strides=ctx.attr("strides"),
                               dilations=(1,) * nsp, pads=ctx.attr("pads"))
    out: list[Any] = list(xs[:2])
    for i, size in enumerate(xs[2:]):
        out.append((size - 1) * s[i] + k[i] - p[i] - p[i + nsp] if isinstance(size, int)
                   else f"{size}_unpooled")
    given = ctx.attr("output_shape")
    if given is None:
        return tuple(out), ctx.input_dtype(0)
    if len(given) != len(xs) or tuple(given[:2]) != tuple(xs[:2]) or any(
            isinstance(a, int) and b < a for a, b in zip(out[2:], given[2:])):
        raise ctx.error(f"= {list(given)}: must be the full output shape, with X's N and C "
                        f"({list(xs[:2])}) and spatial dims at least {out[2:]}",
                        attr="output_shape",
                        hint="give output_shape as the full (N, C, spatial...) shape")
    return tuple(given), ctx.input_dtype(0)


def _maxunpool(x: np.ndarray, indices: np.ndarray, *, kernel_shape: Ints, strides: Ints,
               pads: Ints, output_shape: Ints | None) -> np.ndarray:
    nsp = x.ndim - 2
    k, s, p = kernel_shape, strides, pads
    inferred = x.shape[:2] + tuple((x.shape[2 + i] - 1) * s[i] + k[i] - p[i] - p[i + nsp]
                                   for i in range(nsp))
    y = np.zeros(int(np.prod(inferred)), x.dtype)
    flat = indices.reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() >= y.size):
        raise InterpretError(
            f"MaxUnpool: index {int(flat.max() if flat.max() >= y.size else flat.min())} is "
            f"outside the unpooled tensor of shape {list(inferred)}",
            hint="the indices must come from a MaxPool whose input had the default unpooled size")
    y[flat] = x.reshape(-1)
    if output_shape is None or tuple(output_shape) == inferred:
        return y.reshape(inferred)
    # a larger output_shape: the indices still address the default-size tensor, which goes
    # to the start of each axis (the onnx reference's reading of the spec)
    out = np.zeros(output_shape, x.dtype)
    out[tuple(slice(0, d) for d in inferred)] = y.reshape(inferred)
    return out


(
    define_op("MaxUnpool")
    .doc("the inverse of MaxPool: X's values scattered to the flat positions I (MaxPool's "
         "Indices) of a zero tensor of the default size (in-1)*stride + kernel - pads, placed "
         "at the start of a larger output_shape (full shape) if one is given")
    .input("X", "T").input("I", "i64").output("output", "T")
    .param("kernel_shape", "ints", doc="window shape, one per spatial axis")
    .param("strides", "ints", fill=per_spatial_axis(1), doc="one per spatial axis; absent = all 1")
    .param("pads", "ints", fill=per_spatial_axis(0, entries=2), doc="begins then ends; absent = no padding")
    .param("output_shape", "ints", default=None,
           doc="the full output shape (ONNX's output_shape input); None = the default size")
    .type_param("T", FLOATS + ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"))
    .shape_fn(_maxunpool_shape)
    .compute(_maxunpool)
)
