"""Spatial sampling: GridSample, Col2Im and DeformConv (NC + spatial layout, any spatial rank).

GridSample follows ONNX GridSample-20/22 (https://onnx.ai/onnx/operators/onnx__GridSample.html)
as onnx.reference and onnxruntime compute it: a grid coordinate is denormalised (align_corners),
rounded half to even for ``nearest``, moved back inside the image by ``border`` (clamp) or
``reflection`` when it falls outside, and every tap of the kernel (1 nearest, 2 linear, 4 Keys
cubic with a = -0.75, per axis) is then read with the padding mode (zeros outside, clamped, or
reflected). Sampling is separable: each spatial axis gives tap indices and weights, combined
into flat indices into the image, and the taps are gathered one kernel tap at a time over
every channel and point at once.

Col2Im (https://onnx.ai/onnx/operators/onnx__Col2Im.html) sums columns back into an image, one
kernel tap at a time over strided views (as ConvTranspose scatters). ``image_shape`` and
``block_shape`` (ONNX inputs) are attributes here.

DeformConv (https://onnx.ai/onnx/operators/onnx__DeformConv.html, torchvision's deform_conv2d):
each kernel tap reads X at its window position plus a learnt offset, bilinearly with zeros
outside the image, times an optional mask; the sampled columns (one gather per offset group
and corner) then meet the weights in one grouped matmul, as Conv's im2col does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..opdef import FillFn, ShapeContext, define_op, per_spatial_axis, spatial_shape_of
from .common import ALL, FLOATS, NUMERIC
from .conv import _compute_dtype, _conv_shape, check_spatial, out_size, taps
from .resize import _kernel

Ints = tuple[int, ...]

GRID_MODES = ("linear", "nearest", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
#: Keys' cubic convolution coefficient GridSample uses (onnx.reference, PyTorch).
CUBIC_A = -0.75
#: What to do with an integer image and an interpolating mode. ONNX allows any X type, but
#: neither runtime interpolates integers: onnxruntime has no integer GridSample kernel, and
#: onnx.reference keeps the interpolation weights in X's type, so they truncate to 0 and every
#: point between pixels reads 0. ``nearest`` is a pure gather: it follows onnx.reference, exactly.
INTEGER_X_HINT = ("Cast X to float before GridSample (and the result back, rounding as the model "
                  "needs), or sample with mode 'nearest', which reads integer images exactly")


# -- GridSample -----------------------------------------------------------------------------
def _grid_sample_shape(ctx: ShapeContext) -> Any:
    xs, gs = ctx.input_shape(0), ctx.input_shape(1)
    r = len(xs)
    if r < 3:
        raise ctx.error(f"input X has rank {r}; it needs N, C and at least one spatial axis",
                        hint="X is (N, C, D1, ..., Dr), e.g. (N, C, H, W)")
    if len(gs) != r:
        raise ctx.error(f"grid has rank {len(gs)}, X has rank {r}; they must agree",
                        hint=f"grid is (N, D1_out, ..., Dr_out, {r - 2}) for this X")
    if isinstance(gs[-1], int) and gs[-1] != r - 2:
        raise ctx.error(f"grid's last dim is {gs[-1]}; it must be {r - 2}, one coordinate per "
                        f"spatial axis of X", hint="grid holds (x, y[, z]) per output point")
    if isinstance(xs[0], int) and isinstance(gs[0], int) and xs[0] != gs[0]:
        raise ctx.error(f"X has batch {xs[0]}, grid has batch {gs[0]}; they must agree",
                        hint="X and grid must have one batch size: check the input shapes (--input-shape)")
    mode, dtype = ctx.attr("mode"), ctx.input_dtype(0)
    if dtype not in FLOATS and mode != "nearest":
        raise ctx.error(f"= {mode!r} on X of dtype {dtype}: an integer or bool image is sampled "
                        f"with mode 'nearest' only", attr="mode", hint=INTEGER_X_HINT)
    return (xs[0], xs[1], *gs[1:-1]), dtype


def denormalize(g: np.ndarray, length: int, align_corners: bool) -> np.ndarray:
    """Pixel coordinates of normalised ones in [-1, 1] (computed in the grid's float type, as
    onnx.reference and onnxruntime do, so that nearest's ties round alike)."""
    g = g.astype(np.float64 if g.dtype == np.float64 else np.float32, copy=False)
    if align_corners:
        return (g + 1) / 2 * (length - 1)
    return ((g + 1) * length - 1) / 2


def reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``x`` folded back into [lo, hi] by reflecting at the nearer border until inside."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dx = np.where(below, lo - x, x - hi)
    with np.errstate(invalid="ignore"):  # an infinite point folds to NaN, which reads nothing
        n = np.trunc(dx / span)
        r = dx - n * span
        even = np.fmod(n, 2) == 0
    folded = np.where(below == even, lo + r, hi - r)
    return np.where(below | above, folded, x)


def _cubic_weights(t: np.ndarray) -> np.ndarray:
    """Keys' cubic weights of the taps at -1, 0, 1, 2 from fraction ``t`` (..., 4), Resize's
    cubic kernel."""
    return _kernel(np.arange(-1.0, 3.0) - t[..., None], "cubic", CUBIC_A)


def axis_taps(x: np.ndarray, length: int, mode: str, padding_mode: str,
              align_corners: bool) -> tuple[np.ndarray, np.ndarray]:
    """Tap indices (..., T) into an axis of ``length`` and their weights, for pixel coordinates
    ``x``; a tap that reads outside the axis in ``zeros`` padding has weight 0."""
    lo, hi = (0.0, length - 1.0) if align_corners else (-0.5, length - 0.5)
    x = x.astype(np.float64)
    if mode == "nearest":
        x = np.rint(x)  # half to even, as PyTorch and onnx.reference
    if padding_mode == "border" and mode != "cubic":
        # cubic reads its four taps clamped instead, as onnxruntime and PyTorch do (clamping
        # the coordinate first, as onnx.reference does, gives another value near the edges)
        x = np.where((x < lo) | (x > hi), np.clip(x, 0, length - 1), x)
    elif padding_mode == "reflection":
        x = reflect(x, lo, hi)
    if mode == "nearest":
        base, w = x, np.ones(x.shape + (1,))
        offsets = np.zeros(1)
    else:
        base = np.floor(x)
        t = x - base
        if mode == "linear":
            w, offsets = np.stack([1 - t, t], axis=-1), np.arange(2.0)
        else:
            w, offsets = _cubic_weights(t), np.arange(-1.0, 3.0)
    idx = base[..., None] + offsets
    bad = np.isnan(idx)
    if bad.any():  # a NaN point reads nothing (0), rather than an index no gather can take
        w, idx = np.where(bad, 0.0, w), np.where(bad, 0.0, idx)
    if padding_mode == "zeros":
        w = np.where((idx >= 0) & (idx <= length - 1), w, 0.0)
    elif padding_mode == "reflection":
        idx = np.trunc(reflect(idx, lo, hi))
    return np.clip(idx, 0, length - 1).astype(np.intp), w


def combine_taps(taps: Sequence[tuple[np.ndarray, np.ndarray]],
                 lengths: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per-axis (index, weight) taps (..., T_a), first axis outermost, as flat indices into the
    row-major image and products of weights (..., prod T_a)."""
    flat, w = taps[0]
    for (idx, wa), length in zip(taps[1:], lengths[1:]):
        flat = (flat[..., :, None] * length + idx[..., None, :]).reshape(*flat.shape[:-1], -1)
        w = (w[..., :, None] * wa[..., None, :]).reshape(*w.shape[:-1], -1)
    return flat, w


def gather_taps(xf: np.ndarray, flat: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``sum_t xf[n, c, flat[n, p, t]] * w[n, p, t]`` as (N, C, P), one gather per tap (a cubic
    volume has 64) over every point at once. The gathers read the image channels-last, so
    each point's tap is one contiguous run of C values (5x faster than gathering plane by
    plane); memory stays one output's worth."""
    n, c, size = xf.shape
    xt = np.ascontiguousarray(xf.transpose(0, 2, 1)).reshape(n * size, c)
    base = (np.arange(n) * size)[:, None]
    out = np.zeros((n * flat.shape[1], c), xf.dtype)
    buf = np.empty_like(out)  # one tap's values, reused: no temporary per tap
    wc = w.astype(xf.dtype)
    for t in range(flat.shape[-1]):
        wt = wc[..., t].reshape(-1, 1)
        if wt.any():
            np.take(xt, (flat[..., t] + base).reshape(-1), axis=0, out=buf, mode="clip")  # in range
            buf *= wt
            out += buf
    return out.reshape(n, -1, c).transpose(0, 2, 1)


def _grid_sample(x: np.ndarray, grid: np.ndarray, *, mode: str, padding_mode: str,
                 align_corners: int) -> np.ndarray:
    n, c, *in_sp = x.shape
    out_sp = grid.shape[1:-1]
    nsp = len(in_sp)
    # an integer or bool image is sampled nearest (the shape function): its one tap of weight
    # 1 (0 outside in zeros padding) is gathered in its own type, exactly (int64 past 2**53 too)
    cdt = x.dtype if x.dtype.kind in "biu" else _compute_dtype(x.dtype)  # bf16 is kind "V"
    if 0 in (n, c, *out_sp):
        return np.zeros((n, c, *out_sp), x.dtype)
    if 0 in in_sp:  # nothing to read: every tap is outside (zeros), there is no border
        return np.zeros((n, c, *out_sp), x.dtype)
    g = grid.reshape(n, -1, nsp)
    # grid's coordinates run fastest axis first: (x, y[, z]) address (W, H[, D])
    taps = [axis_taps(denormalize(g[..., nsp - 1 - a], in_sp[a], bool(align_corners)), in_sp[a],
                      mode, padding_mode, bool(align_corners)) for a in range(nsp)]
    flat, w = combine_taps(taps, in_sp)
    y = gather_taps(x.astype(cdt, copy=False).reshape(n, c, -1), flat, w)
    return y.reshape(n, c, *out_sp).astype(x.dtype, copy=False)


(
    define_op("GridSample")
    .doc("Sample X (N, C, D1..Dr) at the normalised points of grid (N, D1_out..Dr_out, r): "
         "nearest, N-linear or bicubic (an integer or bool X: nearest only), "
         "zeros/border/reflection padding; ONNX GridSample-22")
    .input("X", "T").input("grid", "T2").output("Y", "T")
    .param("mode", "str", "linear", allowed=GRID_MODES, doc="linear, nearest or cubic")
    .param("padding_mode", "str", "zeros", allowed=PADDING_MODES,
           doc="what points outside the image read")
    .param("align_corners", "int", 0, allowed=(0, 1),
           doc="1: -1 and 1 are the corner pixels' centres; 0: their outer edges")
    .type_param("T", ALL).type_param("T2", FLOATS)
    .shape_fn(_grid_sample_shape)
    .compute(_grid_sample)
)


# -- Col2Im ---------------------------------------------------------------------------------
def per_image_axis(value: int, entries: int = 1) -> FillFn:
    """A fill of ``entries`` values per axis of ``image_shape``, all ``value``."""

    def fill(inputs: Sequence[Any], attrs: dict[str, Any]) -> tuple[int, ...] | None:
        image = attrs.get("image_shape")
        return None if not image else (value,) * (entries * len(image))

    return fill


def _col2im_blocks(image: Ints, k: Ints, s: Ints, d: Ints, p: Ints) -> list[int]:
    """The number of sliding blocks along each image axis."""
    nsp = len(image)
    return [out_size(image[i], k[i], s[i], d[i], p[i], p[i + nsp]) for i in range(nsp)]


def _col2im_shape(ctx: ShapeContext) -> Any:
    xs = ctx.input_shape(0)
    image, block = tuple(ctx.attr("image_shape")), tuple(ctx.attr("block_shape"))
    if len(xs) != 3:
        raise ctx.error(f"input has rank {len(xs)}; it must be 3, (N, C * prod(block_shape), L)",
                        hint="give the columns as im2col (torch's unfold) makes them")
    if not image or any(v < 1 for v in image):
        raise ctx.error(f"= {list(image)}: give one size >= 1 per image axis", attr="image_shape",
                        hint="give image_shape one size >= 1 per image axis")
    if len(block) != len(image):
        raise ctx.error(f"has {len(block)} entries, image_shape has {len(image)}",
                        attr="block_shape", hint="one block size per image axis")
    if any(v < 1 for v in block):
        raise ctx.error(f"= {list(block)}: every entry must be >= 1", attr="block_shape",
                        hint="give block_shape entries >= 1")
    k, s, d, p = check_spatial(ctx, len(image), kernel=block, strides=ctx.attr("strides"),
                               dilations=ctx.attr("dilations"), pads=ctx.attr("pads"))
    kprod = math.prod(k)
    if isinstance(xs[1], int) and xs[1] % kprod:
        raise ctx.error(f"input has {xs[1]} rows, not a multiple of prod(block_shape) = {kprod}",
                        hint="rows are C * prod(block_shape)")
    blocks = _col2im_blocks(image, k, s, d, p)
    if any(b < 1 for b in blocks):
        raise ctx.error(f"a block ({list(block)} with dilations {list(d)}) does not fit the padded "
                        f"image {list(image)}", attr="block_shape",
                        hint="use a smaller block or dilation, more padding, or a larger image_shape")
    if isinstance(xs[2], int) and xs[2] != math.prod(blocks):
        raise ctx.error(f"input has {xs[2]} columns; image_shape, block_shape, pads, strides and "
                        f"dilations give {' x '.join(map(str, blocks))} = {math.prod(blocks)} blocks",
                        hint="check the attributes against the im2col that made the columns")
    c = xs[1] // kprod if isinstance(xs[1], int) else ctx.dim_floordiv(xs[1], kprod)
    return (xs[0], c, *image), ctx.input_dtype(0)


def _col2im(x: np.ndarray, *, image_shape: Ints, block_shape: Ints, dilations: Ints, pads: Ints,
            strides: Ints) -> np.ndarray:
    k, s, d, p = block_shape, strides, dilations, pads
    nsp = len(image_shape)
    blocks = _col2im_blocks(image_shape, k, s, d, p)
    n = x.shape[0]
    kprod = math.prod(k)
    c = x.shape[1] // kprod
    cols = x.reshape(n, c, kprod, *blocks)
    full = [image_shape[i] + p[i] + p[i + nsp] for i in range(nsp)]
    acc = np.zeros((n, c, *full), x.dtype)
    for t, view in taps(acc, k, s, d, blocks):  # one strided view per kernel tap
        view += cols[:, :, t]
    crop = tuple(slice(p[i], p[i] + image_shape[i]) for i in range(nsp))
    return np.ascontiguousarray(acc[(slice(None), slice(None)) + crop])


(
    define_op("Col2Im")
    .doc("Sum the columns (N, C * prod(block_shape), L) of sliding blocks back into images "
         "(N, C, *image_shape), overlaps added (torch's fold); ONNX Col2Im-18")
    .input("input", "T").output("output", "T")
    .param("image_shape", "ints", doc="the image's spatial shape (ONNX input)")
    .param("block_shape", "ints", doc="the block's (kernel's) spatial shape (ONNX input)")
    .param("dilations", "ints", fill=per_image_axis(1), doc="one per image axis; absent = all 1")
    .param("pads", "ints", fill=per_image_axis(0, 2),
           doc="begins then ends, one pair per image axis; absent = no padding")
    .param("strides", "ints", fill=per_image_axis(1), doc="one per image axis; absent = all 1")
    .type_param("T", NUMERIC)
    .shape_fn(_col2im_shape)
    .compute(_col2im)
)


# -- DeformConv -----------------------------------------------------------------------------
def _deform_conv_shape(ctx: ShapeContext) -> Any:
    # X and W, the window attributes and group are a convolution's (bias is input 3 here)
    (n, m, *out_sp), dtype = _conv_shape(ctx, with_bias=False)
    xs, c = ctx.input_shape(0), ctx.input_shape(0)[1]
    nsp = len(xs) - 2
    og = ctx.attr("offset_group")
    if isinstance(c, int) and c % og:
        raise ctx.error(f"= {og} does not divide the {c} input channels", attr="offset_group",
                        hint="offset_group must divide the input's channels: check the attribute and the "
                             "input's channels (--input-shape)")
    kprod = math.prod(ctx.attr("kernel_shape"))
    for i, name, per_tap in ((2, "offset", nsp), (4, "mask", 1)):
        if not ctx.has_input(i):
            continue
        want = [n, og * kprod * per_tap, *out_sp]
        got = list(ctx.input_shape(i))
        if len(got) != len(want) or any(isinstance(a, int) and isinstance(b, int) and a != b
                                        for a, b in zip(got, want)):
            what = f"{og} offset group(s) x {kprod} taps" + (f" x {nsp} axes" if per_tap > 1 else "")
            raise ctx.error(f"{name} has shape {got}; it must be {want} ({what}, then the output's "
                            f"spatial shape)", hint="check offset_group, the kernel and the window "
                                                    "attributes against the model that made it")
    if ctx.has_input(3) and tuple(ctx.input_shape(3)) != (m,):
        raise ctx.error(f"bias B has shape {list(ctx.input_shape(3))}; it must be [{m}]",
                        hint="B holds one value per output channel: check the bias weights")
    return (n, m, *out_sp), dtype


def _sample_columns(x: np.ndarray, offset: np.ndarray, *, offset_group: int, k: Ints, s: Ints,
                    d: Ints, p: Ints, out_sp: Sequence[int], cdt: np.dtype) -> np.ndarray:
    """The deformed im2col columns (N, C, prod(k), P): each tap of each output point read at its
    window position plus its offset, N-linearly, zeros outside (torchvision, onnx.reference)."""
    n, c, *in_sp = x.shape
    nsp, kprod, npts = len(k), math.prod(k), math.prod(out_sp)
    off = offset.reshape(n, offset_group, kprod, nsp, npts).astype(np.float64)
    taps = np.array(list(np.ndindex(*k)), dtype=np.float64).reshape(kprod, nsp)
    origin = [g.reshape(-1) for g in np.meshgrid(*[np.arange(o) for o in out_sp], indexing="ij")]
    cog = c // offset_group
    cols = np.empty((n, c, kprod, npts), cdt)
    for og in range(offset_group):
        per_axis = []
        for a in range(nsp):
            pos = (origin[a] * s[a] - p[a])[None, None, :] + (taps[:, a] * d[a])[None, :, None]
            pos = pos + off[:, og, :, a, :]
            per_axis.append(axis_taps(pos.reshape(n, -1), in_sp[a], "linear", "zeros", True))
        flat, w = combine_taps(per_axis, in_sp)
        flat, w = flat.reshape(n, kprod, npts, -1), w.reshape(n, kprod, npts, -1)
        xs = x[:, og * cog:(og + 1) * cog].astype(cdt, copy=False).reshape(n, cog, -1)
        for t in range(kprod):  # one kernel tap at a time: memory of one tap's columns
            cols[:, og * cog:(og + 1) * cog, t] = gather_taps(xs, flat[:, t], w[:, t])
    return cols


def _deform_conv(x: np.ndarray, w: np.ndarray, offset: np.ndarray, b: np.ndarray | None = None,
                 mask: np.ndarray | None = None, *, group: int, offset_group: int,
                 kernel_shape: Ints, strides: Ints, dilations: Ints, pads: Ints) -> np.ndarray:
    n, c = x.shape[:2]
    m = w.shape[0]
    out_sp = offset.shape[2:]
    kprod, npts = math.prod(kernel_shape), math.prod(out_sp)
    cdt = _compute_dtype(x.dtype)
    cols = _sample_columns(x, offset, offset_group=offset_group, k=kernel_shape, s=strides,
                           d=dilations, p=pads, out_sp=out_sp, cdt=cdt)
    if mask is not None:
        cols = cols.reshape(n, offset_group, c // offset_group, kprod, npts)
        cols *= mask.astype(cdt, copy=False).reshape(n, offset_group, 1, kprod, npts)
    cg, mg = c // group, m // group
    y = np.matmul(w.astype(cdt, copy=False).reshape(1, group, mg, cg * kprod),
                  cols.reshape(n, group, cg * kprod, npts))
    y = y.reshape(n, m, *out_sp)
    if b is not None:
        y += b.astype(cdt, copy=False).reshape((1, m) + (1,) * len(out_sp))
    return y.astype(x.dtype, copy=False)


(
    define_op("DeformConv")
    .doc("Deformable convolution of X (N, C, D1..) with W (M, C/group, k1..): each kernel tap "
         "reads X at its window position plus offset (N, offset_group*prod(k)*r, out..), "
         "bilinearly, times the optional mask (N, offset_group*prod(k), out..); bias B (M)")
    .input("X", "T").input("W", "T").input("offset", "T").input("B", "T", optional=True)
    .input("mask", "T", optional=True)
    .output("Y", "T")
    .param("group", "int", default=1, minimum=1, doc="number of channel groups")
    .param("offset_group", "int", default=1, minimum=1,
           doc="number of channel groups that share one set of offsets (and mask)")
    .param("kernel_shape", "ints", fill=spatial_shape_of(1), doc="absent = taken from W")
    .param("strides", "ints", fill=per_spatial_axis(1), doc="one per spatial axis; absent = all 1")
    .param("dilations", "ints", fill=per_spatial_axis(1), doc="one per spatial axis; absent = all 1")
    .param("pads", "ints", fill=per_spatial_axis(0, entries=2),
           doc="begins then ends, one pair per spatial axis; absent = no padding")
    .type_param("T", FLOATS)
    .shape_fn(_deform_conv_shape)
    .compute(_deform_conv)
)
