"""Convolutions: Conv and ConvTranspose over 1-3 spatial axes (NC + spatial layout).

Attribute conventions (shared with ``pool.py``): ``pads`` are explicit, all begins then all
ends (ONNX order), never ``auto_pad`` (the mappers resolve it from static shapes).
``kernel_shape``, ``strides``, ``dilations`` and ``pads`` (and ConvTranspose's
``output_padding``) are filled when the node is created if they are absent, with what ONNX
means by their absence: the kernel's spatial shape from the weights, stride 1, dilation 1, no
padding. Every node holds them explicitly (the verifier requires it), so no compute or kernel
guesses; the shape function checks that each has one entry per spatial axis (``pads``: two).

The kernels are vectorised: Conv is im2col (a strided window view copied once) followed by
one (grouped, batched) matmul; a conv with one input channel per group (depthwise) sums
the kernel taps over whole shifted views instead, so no loop ever runs per channel.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..opdef import ShapeContext, define_op, per_spatial_axis, spatial_shape_of
from ..types import Dim
from .common import FLOATS

Ints = tuple[int, ...]


def _check_len(ctx: ShapeContext, name: str, value: Sequence[int] | None, n: int) -> None:
    if value is None:
        raise ctx.error("absent: it cannot be filled from the inputs", attr=name,
                        hint="give it explicitly, one entry per spatial axis")
    if len(value) != n:
        raise ctx.error(
            f"has {len(value)} entries, the input has {n // (2 if name == 'pads' else 1)} "
            f"spatial axes",
            attr=name,
            hint="give one entry per spatial axis" + (" (begins, then ends)" if name == "pads" else ""),
        )


def check_spatial(
    ctx: ShapeContext,
    nsp: int,
    *,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[int],
) -> tuple[Ints, Ints, Ints, Ints]:
    """Validate the spatial attributes (lengths, ranges); returns them as tuples."""
    if nsp < 1:
        raise ctx.error(
            f"input has rank {nsp + 2}; it needs N, C and at least one spatial axis",
            hint="the layout is N, C, D1, D2, ...",
        )
    for name, val, n in (("kernel_shape", kernel, nsp), ("strides", strides, nsp),
                         ("dilations", dilations, nsp), ("pads", pads, 2 * nsp)):
        _check_len(ctx, name, val, n)
    for name, val, low in (("kernel_shape", kernel, 1), ("strides", strides, 1),
                           ("dilations", dilations, 1), ("pads", pads, 0)):
        if any(v < low for v in val):
            raise ctx.error(f"= {list(val)}: every entry must be >= {low}", attr=name,
                            hint="correct the attribute in the model (or export the model again)")
    return tuple(kernel), tuple(strides), tuple(dilations), tuple(pads)


def out_size(size: int, k: int, s: int, d: int, pb: int, pe: int, ceil_mode: bool = False) -> int:
    """Output length of a sliding window; in ceil mode a window starting in the end padding is
    dropped (onnx reference / PyTorch rule)."""
    span = size + pb + pe - ((k - 1) * d + 1)
    if span < 0:
        return 0
    if not ceil_mode:
        return span // s + 1
    n = -(-span // s) + 1
    if (n - 1) * s >= size + pb:
        n -= 1
    return n


def spatial_out(ctx: ShapeContext, in_sp: Sequence[Any], k: Ints, s: Ints, d: Ints, p: Ints,
                ceil_mode: bool = False) -> list[Any]:
    """Output spatial dims (symbolic input dims stay symbolic), erroring on empty outputs."""
    nsp = len(in_sp)
    out: list[Any] = []
    for i, size in enumerate(in_sp):
        if not isinstance(size, int):
            if ceil_mode:  # the last window's start rule has no expression: the run says
                out.append(ctx.runtime_dim(f"sp{i}"))
            else:  # floor((size + pads - dilated kernel) / stride) + 1
                span = ctx.dim_add(size, p[i] + p[i + nsp] - d[i] * (k[i] - 1) - 1)
                out.append(ctx.dim_add(ctx.dim_floordiv(span, s[i]), 1))
            continue
        o = out_size(size, k[i], s[i], d[i], p[i], p[i + nsp], ceil_mode)
        if o < 1:
            raise ctx.error(
                f"spatial axis {i}: the window ({(k[i] - 1) * d[i] + 1} wide with dilation) does not "
                f"fit the padded input ({size} + pads {p[i]}, {p[i + nsp]})",
                attr="kernel_shape",
                hint="use a smaller kernel or dilation, or more padding",
            )
        out.append(o)
    return out


def pad_spatial(x: np.ndarray, pads: Ints, value: Any = 0, extra_end: Sequence[int] = ()) -> np.ndarray:
    """``x`` padded on its spatial axes (begins, then ends), plus ``extra_end`` more at the ends."""
    nsp = x.ndim - 2
    ends = [pads[nsp + i] + (extra_end[i] if extra_end else 0) for i in range(nsp)]
    if not any(pads[:nsp]) and not any(ends):
        return x
    # a filled buffer and one slice assignment: several times faster than np.pad
    shape = x.shape[:2] + tuple(x.shape[2 + i] + pads[i] + ends[i] for i in range(nsp))
    out = np.zeros(shape, x.dtype) if value == 0 else np.full(shape, value, dtype=x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(pads[i], pads[i] + x.shape[2 + i])
                                           for i in range(nsp))] = x
    return out


def taps(
    xp: np.ndarray, k: Ints, s: Ints, d: Ints, out_sp: Sequence[int]
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (tap index, strided view of ``xp``) for each kernel tap; views have the output's
    spatial shape."""
    nsp = len(k)
    for t, pos in enumerate(np.ndindex(*k)):
        sl = tuple(slice(pos[i] * d[i], pos[i] * d[i] + (out_sp[i] - 1) * s[i] + 1, s[i])
                   for i in range(nsp))
        yield t, xp[(slice(None), slice(None)) + sl]


def windows(xp: np.ndarray, k: Ints, s: Ints, d: Ints, out_sp: Sequence[int]) -> np.ndarray:
    """A zero-copy view (N, C, *out, *kernel) of the windows of the padded ``xp``."""
    nsp = len(k)
    eff = tuple((k[i] - 1) * d[i] + 1 for i in range(nsp))
    v = sliding_window_view(xp, eff, axis=tuple(range(2, 2 + nsp)))
    sl = tuple(slice(0, (out_sp[i] - 1) * s[i] + 1, s[i]) for i in range(nsp))
    sl += tuple(slice(None, None, d[i]) for i in range(nsp))
    return v[(slice(None), slice(None)) + sl]


def _weight_kernel(ctx: ShapeContext, ws: Sequence[Dim]) -> Ints:
    """The kernel's spatial shape from the weights' shape ``ws`` (M or C, C/group or M/group, k1,
    ...); the output size needs it, so a symbolic entry is a ShapeError naming W."""
    k = tuple(d for d in ws[2:] if isinstance(d, int))
    if len(k) != len(ws) - 2:
        raise ctx.error(f"weights W have spatial shape {list(ws[2:])}; the kernel size must be static",
                        hint="give W a static shape (e.g. make it a constant initializer)")
    return k


def _compute_dtype(dt: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


# -- Conv ------------------------------------------------------------------------------
def _window_of_weights(ctx: ShapeContext, w_layout: str) -> Any:
    """Input and weight shapes, and the kernel, strides, dilations and pads checked against
    them (shared by Conv and ConvTranspose; ``w_layout`` names W's axes for the hint)."""
    xs, ws = ctx.input_shape(0), ctx.input_shape(1)
    nsp = len(xs) - 2
    if len(ws) != len(xs):
        raise ctx.error(f"weights W have rank {len(ws)}, input X has rank {len(xs)}; they must agree",
                        hint=f"W is {w_layout}")
    wk = _weight_kernel(ctx, ws)  # first: a symbolic W is why a kernel_shape could not be filled
    k, s, d, p = check_spatial(ctx, nsp, kernel=ctx.attr("kernel_shape"), strides=ctx.attr("strides"),
                               dilations=ctx.attr("dilations"), pads=ctx.attr("pads"))
    if wk != k:
        raise ctx.error(f"= {list(k)} but the weights' spatial shape is {list(ws[2:])}",
                        attr="kernel_shape", hint="drop kernel_shape or make it match W")
    return xs, ws, nsp, k, s, d, p


def _conv_shape(ctx: ShapeContext, *, with_bias: bool = True) -> Any:
    xs, ws, nsp, k, s, d, p = _window_of_weights(ctx, "(M, C/group, k1, k2, ...)")
    group = ctx.attr("group")
    c, m = xs[1], ws[0]
    if isinstance(c, int) and c % group:
        raise ctx.error(f"= {group} does not divide the {c} input channels", attr="group",
                        hint="the input's channels come from the model's input shape (--input-shape) and "
                             "the layers before: check them and the group attribute")
    if isinstance(m, int) and m % group:
        raise ctx.error(f"= {group} does not divide the {m} output channels (W's dim 0)",
                        attr="group",
                        hint="W's dim 0 (the output channels) must be a multiple of group: check the "
                             "weights and the group attribute")
    if isinstance(c, int) and isinstance(ws[1], int) and ws[1] * group != c:
        raise ctx.error(
            f"input X has {c} channels but W expects {ws[1]} per group x group {group} = "
            f"{ws[1] * group}",
            hint="check the weights' shape (M, C/group, ...) and the group attribute",
        )
    if with_bias and ctx.has_input(2) and tuple(ctx.input_shape(2)) != (m,):
        raise ctx.error(f"bias B has shape {list(ctx.input_shape(2))}; it must be [{m}]",
                        hint="B holds one value per output channel (W's dim 0): check the bias weights")
    return (xs[0], m, *spatial_out(ctx, xs[2:], k, s, d, p)), ctx.input_dtype(0)


def conv_nd(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, *, group: int, k: Ints, s: Ints,
            d: Ints, p: Ints) -> np.ndarray:
    """N-d convolution (cross-correlation) in NC+spatial layout; the numpy kernel of Conv."""
    out_dt = x.dtype
    cdt = _compute_dtype(x.dtype)
    w_given = w
    x = x.astype(cdt, copy=False)
    w = w.astype(cdt, copy=False)
    nsp = len(k)
    out_sp = [out_size(x.shape[2 + i], k[i], s[i], d[i], p[i], p[i + nsp]) for i in range(nsp)]
    yw = _winograd(x, w_given, None if b is None else b.astype(cdt, copy=False), group, k, s, d, p,
                   out_sp)
    if yw is not None:
        return yw.astype(out_dt, copy=False)  # the bias is in already
    y = direct_conv(x, w, group, k, s, d, p, out_sp)
    if b is not None:
        y += b.astype(cdt).reshape((1, w.shape[0]) + (1,) * nsp)  # y is a fresh buffer here
    return y.astype(out_dt, copy=False)


def direct_conv(x: np.ndarray, w: np.ndarray, group: int, k: Ints, s: Ints, d: Ints, p: Ints,
                out_sp: Sequence[int]) -> np.ndarray:
    """The convolution in ``x``'s type (``w`` of the same), no bias, as a fresh (N, M, *out)
    buffer: 1x1 by one matmul per group, depthwise by taps, the rest by im2col + matmul."""
    n, c = x.shape[:2]
    m = w.shape[0]
    nsp = len(k)
    kprod = int(np.prod(k))
    cg, mg = c // group, m // group
    if kprod == 1 and not any(p):
        # 1x1: one matmul per group, no im2col (a stride only picks every s-th pixel)
        xs = x[(slice(None), slice(None)) + tuple(slice(None, None, v) for v in s)]
        y = np.matmul(w.reshape(group, mg, cg), xs.reshape(n, group, cg, -1))
    elif cg == 1:
        y = _depthwise(x, w, mg, k, s, d, p, out_sp)
    else:
        xp = pad_spatial(x, p)
        win = windows(xp, k, s, d, out_sp)  # (N, C, *out, *k)
        # (C, *k, N, *out) made contiguous once: the im2col matrix, grouped
        order = (1, *range(2 + nsp, 2 + 2 * nsp), 0, *range(2, 2 + nsp))
        col = np.ascontiguousarray(win.transpose(order)).reshape(group, cg * kprod, -1)
        y = np.matmul(w.reshape(group, mg, cg * kprod), col)  # (G, Mg, N*out)
        y = np.moveaxis(y.reshape(m, n, *out_sp), 0, 1)
    return y.reshape(n, m, *out_sp)


def _winograd(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, group: int, k: Ints, s: Ints,
              d: Ints, p: Ints, out_sp: Sequence[int]) -> np.ndarray | None:
    """The convolution (plus bias) by Winograd's minimal filtering where
    :func:`~opbridge.ir.winograd.winograd_tile` chooses it, else None."""
    from ..winograd import transformed_weights, winograd_conv2d, winograd_tile

    r = winograd_tile(x.shape[1], w.shape[0], k, s, d, group, out_sp, x.dtype)
    if r is None:
        return None
    u = transformed_weights(w, r)
    return None if u is None else winograd_conv2d(x, u, r, tuple(p), bias=b)


#: A depthwise accumulator above this many bytes is summed a block of channels at a time, each
#: block about ``_DW_BLOCK`` bytes: its accumulator and product stay in cache over the taps
#: (2-3x faster on large planes; below it one pass over all channels is as fast).
_DW_WHOLE = 1 << 22
_DW_BLOCK = 1 << 18


def _depthwise(x: np.ndarray, w: np.ndarray, mg: int, k: Ints, s: Ints, d: Ints, p: Ints,
               out_sp: Sequence[int]) -> np.ndarray:
    """Depthwise (one input channel per group): the taps summed over whole shifted views, in
    tap order (the same sum, bit for bit, whichever way the views and channels are cut)."""
    n, nsp, m = x.shape[0], len(k), w.shape[0]
    xp = pad_spatial(x, p)
    if mg > 1:
        xp = np.repeat(xp, mg, axis=1)
    wk = w.reshape(m, -1)
    if nsp == 2:
        views, width = _flat_taps(xp, k, s, d, out_sp)
        acc = _sum_taps(views, wk, (n, m, out_sp[0] * width), x.dtype)
        return np.ascontiguousarray(acc.reshape(n, m, out_sp[0], width)[:, :, :, :out_sp[1]])
    views = list(_phase_taps(xp, k, s, d, out_sp) if _phased(k, s) else taps(xp, k, s, d, out_sp))
    return _sum_taps(views, wk, (n, m, *out_sp), x.dtype)


def _sum_taps(views: list[tuple[int, np.ndarray]], wk: np.ndarray, shape: tuple[int, ...],
              dtype: np.dtype) -> np.ndarray:
    """``sum_t views[t] * wk[:, t]`` into a fresh array of ``shape`` (N, M, ...), tap by tap
    from zero; a large one a block of channels at a time (see ``_DW_WHOLE``)."""
    n, m = shape[:2]
    acc = np.zeros(shape, dtype)
    per_channel = max(acc.nbytes // max(m, 1), 1)
    block = max(m if acc.nbytes <= _DW_WHOLE else _DW_BLOCK // per_channel, 1)
    tmp = np.empty((n, min(block, m), *shape[2:]), dtype)
    wshape = (1, -1) + (1,) * (len(shape) - 2)
    for c0 in range(0, m, block):
        a = acc[:, c0:c0 + block]
        tb = tmp[:, :a.shape[1]]
        wb = wk[c0:c0 + block]
        for t, view in views:
            np.multiply(view[:, c0:c0 + block], wb[:, t].reshape(wshape), out=tb)
            a += tb
    return acc


def _flat_taps(xp: np.ndarray, k: Ints, s: Ints, d: Ints,
               out_sp: Sequence[int]) -> tuple[list[tuple[int, np.ndarray]], int]:
    """2-D taps as 1-D views (N, M, oh * width): each stride phase of ``xp`` (``xp[..., r::s]``,
    all of one (rows + 1, width) shape, zero-filled) is flattened, so the tap starting at
    (a, b) is the contiguous run from ``(a // sh) * width + b // sw`` of ``oh`` whole phase
    rows. An output row so holds ``width >= ow`` entries: the first ``ow`` are the
    convolution's, the rest (reads running into the next row) are cut by the caller. One
    long run per channel instead of ``oh`` short rows: numpy's inner loops run 2x faster."""
    n, m, hp, wp = xp.shape
    (sh, sw), oh = s, out_sp[0]
    rows, width = -(-hp // sh), -(-wp // sw)
    phases: dict[tuple[int, int], np.ndarray] = {}
    views = []
    for t, (i, j) in enumerate(np.ndindex(*k)):
        a, b = i * d[0], j * d[1]
        r = (a % sh, b % sw)
        if r not in phases:
            src = xp[:, :, r[0]::sh, r[1]::sw]
            # one spare row: the last tap's run ends up to width - 1 entries past the rows
            buf = np.zeros((n, m, (rows + 1) * width), xp.dtype)
            buf.reshape(n, m, rows + 1, width)[:, :, :src.shape[2], :src.shape[3]] = src
            phases[r] = buf
        start = (a // sh) * width + b // sw
        views.append((t, phases[r][:, :, start:start + oh * width]))
    return views, width


def _phased(k: Ints, s: Ints) -> bool:
    """Whether a strided depthwise conv reads its taps from stride phases: when its taps
    outnumber the phases enough to pay the phases' one copy of the input."""
    phases = int(np.prod(s))
    return phases > 1 and int(np.prod(k)) >= 2 * phases


def _phase_taps(xp: np.ndarray, k: Ints, s: Ints, d: Ints,
                out_sp: Sequence[int]) -> Iterator[tuple[int, np.ndarray]]:
    """:func:`taps` of a strided window read from the stride phases of ``xp`` (``xp[..., r::s]``
    made contiguous once per phase offset r): a tap starting at ``a`` reads phase ``a % s``
    from ``a // s`` on, so its view walks contiguous rows instead of every s-th element."""
    nsp = len(k)
    phases: dict[tuple[int, ...], np.ndarray] = {}
    for t, pos in enumerate(np.ndindex(*k)):
        start = [pos[i] * d[i] for i in range(nsp)]
        r = tuple(start[i] % s[i] for i in range(nsp))
        if r not in phases:
            phases[r] = np.ascontiguousarray(
                xp[(slice(None), slice(None)) + tuple(slice(r[i], None, s[i]) for i in range(nsp))])
        off = [start[i] // s[i] for i in range(nsp)]
        yield t, phases[r][(slice(None), slice(None))
                           + tuple(slice(off[i], off[i] + out_sp[i]) for i in range(nsp))]


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, group: int,
          kernel_shape: Ints, strides: Ints, dilations: Ints, pads: Ints) -> np.ndarray:
    return conv_nd(x, w, b, group=group, k=kernel_shape, s=strides, d=dilations, p=pads)


_SPATIAL_DOC = {
    "kernel_shape": "kernel spatial shape; absent = taken from W",
    "strides": "one per spatial axis; absent = all 1",
    "dilations": "one per spatial axis; absent = all 1",
    "pads": "begins then ends, one pair per spatial axis; absent = no padding",
}

(
    define_op("Conv")
    .doc("N-d convolution (cross-correlation) of X (N, C, D1..) with W (M, C/group, k1..), plus "
         "optional bias B (M); explicit pads, no auto_pad")
    .input("X", "T").input("W", "T").input("B", "T", optional=True)
    .output("Y", "T")
    .param("group", "int", default=1, minimum=1, doc="number of channel groups")
    .param("kernel_shape", "ints", fill=spatial_shape_of(1), doc=_SPATIAL_DOC["kernel_shape"])
    .param("strides", "ints", fill=per_spatial_axis(1), doc=_SPATIAL_DOC["strides"])
    .param("dilations", "ints", fill=per_spatial_axis(1), doc=_SPATIAL_DOC["dilations"])
    .param("pads", "ints", fill=per_spatial_axis(0, entries=2), doc=_SPATIAL_DOC["pads"])
    .type_param("T", FLOATS)
    .shape_fn(_conv_shape)
    .compute(_conv)
)


# -- ConvTranspose -----------------------------------------------------------------------
def _convt_shape(ctx: ShapeContext) -> Any:
    xs, ws, nsp, k, s, d, p = _window_of_weights(ctx, "(C, M/group, k1, k2, ...)")
    op = ctx.attr("output_padding")
    _check_len(ctx, "output_padding", op, nsp)
    if any(v < 0 for v in op):
        raise ctx.error(f"= {list(op)}: entries must be >= 0", attr="output_padding",
                        hint="correct the attribute in the model: output_padding entries are >= 0")
    group = ctx.attr("group")
    c = xs[1]
    if isinstance(c, int) and ws[0] != c:
        raise ctx.error(f"input X has {c} channels but W's dim 0 is {ws[0]}",
                        hint="W is (C, M/group, k1, ...)")
    if isinstance(c, int) and c % group:
        raise ctx.error(f"= {group} does not divide the {c} input channels", attr="group",
                        hint="the input's channels come from the model's input shape (--input-shape) and "
                             "the layers before: check them and the group attribute")
    m = ws[1] * group
    if ctx.has_input(2) and tuple(ctx.input_shape(2)) != (m,):
        raise ctx.error(f"bias B has shape {list(ctx.input_shape(2))}; it must be [{m}]",
                        hint="B holds one value per output channel: check the bias weights")
    out: list[Any] = []
    for i, size in enumerate(xs[2:]):
        if not isinstance(size, int):  # (size - 1) * stride + dilated kernel + output_padding - pads
            out.append(ctx.dim_add(ctx.dim_mul(ctx.dim_sub(size, 1), s[i]),
                                   (k[i] - 1) * d[i] + 1 + op[i] - p[i] - p[i + nsp]))
            continue
        o = (size - 1) * s[i] + (k[i] - 1) * d[i] + 1 + op[i] - p[i] - p[i + nsp]
        if o < 1:
            raise ctx.error(f"spatial axis {i}: the pads crop the whole output", attr="pads",
                            hint="use smaller pads, or a larger input (--input-shape)")
        out.append(o)
    return (xs[0], m, *out), ctx.input_dtype(0)


def _conv_transpose(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, group: int,
                    kernel_shape: Ints, strides: Ints, dilations: Ints, pads: Ints,
                    output_padding: Ints) -> np.ndarray:
    nsp = x.ndim - 2
    k, s, d, p, op = kernel_shape, strides, dilations, pads, output_padding
    out_dt = x.dtype
    cdt = _compute_dtype(x.dtype)
    n, c = x.shape[:2]
    in_sp = x.shape[2:]
    cg, mg = c // group, w.shape[1]
    m = mg * group
    kprod = int(np.prod(k))
    # cols[g, mg*k, n*in] = W_g^T @ X_g, then scattered (col2im) tap by tap
    xg = x.astype(cdt, copy=False).reshape(n, group, cg, -1).transpose(1, 2, 0, 3).reshape(group, cg, -1)
    wg = w.astype(cdt, copy=False).reshape(group, cg, mg * kprod)
    cols = np.matmul(wg.transpose(0, 2, 1), xg).reshape(group, mg, kprod, n, *in_sp)
    cols = cols.reshape(m, kprod, n, *in_sp)
    full = [(in_sp[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 + op[i] for i in range(nsp)]
    acc = np.zeros((m, n, *full), cdt)
    for t, pos in enumerate(np.ndindex(*k)):
        sl = tuple(slice(pos[i] * d[i], pos[i] * d[i] + (in_sp[i] - 1) * s[i] + 1, s[i])
                   for i in range(nsp))
        acc[(slice(None), slice(None)) + sl] += cols[:, t]
    crop = tuple(slice(p[i], full[i] - p[i + nsp]) for i in range(nsp))
    y = np.moveaxis(acc[(slice(None), slice(None)) + crop], 0, 1)
    if b is not None:
        y = y + b.astype(cdt).reshape((1, m) + (1,) * nsp)
    return np.ascontiguousarray(y).astype(out_dt, copy=False)


(
    define_op("ConvTranspose")
    .doc("N-d transposed convolution of X (N, C, D1..) with W (C, M/group, k1..), plus optional "
         "bias B (M); output size (in-1)*stride + (k-1)*dilation + 1 + output_padding - pads. "
         "ONNX's output_shape and auto_pad are resolved into pads/output_padding by the mapper")
    .input("X", "T").input("W", "T").input("B", "T", optional=True)
    .output("Y", "T")
    .param("group", "int", default=1, minimum=1, doc="number of channel groups")
    .param("kernel_shape", "ints", fill=spatial_shape_of(1), doc=_SPATIAL_DOC["kernel_shape"])
    .param("strides", "ints", fill=per_spatial_axis(1), doc=_SPATIAL_DOC["strides"])
    .param("dilations", "ints", fill=per_spatial_axis(1), doc=_SPATIAL_DOC["dilations"])
    .param("pads", "ints", fill=per_spatial_axis(0, entries=2),
           doc="output crop, begins then ends; absent = none")
    .param("output_padding", "ints", fill=per_spatial_axis(0),
           doc="extra output at the end of each spatial axis; absent = all 0")
    .type_param("T", FLOATS)
    .shape_fn(_convt_shape)
    .compute(_conv_transpose)
)


# -- ConvInteger ----------------------------------------------------------------------------------
def _convint_shape(ctx: ShapeContext) -> Any:
    shape, _ = _conv_shape(ctx, with_bias=False)
    m = ctx.input_shape(1)[0]
    for i, name, allowed in ((2, "x_zero_point", ((), (1,))), (3, "w_zero_point", ((), (1,), (m,)))):
        if ctx.has_input(i):
            if ctx.input_dtype(i) != ctx.input_dtype(i - 2):
                raise ctx.error(f"'{name}' is {ctx.input_dtype(i)}, its operand is "
                                f"{ctx.input_dtype(i - 2)}; they must agree",
                                hint="give the zero point the dtype of the tensor it belongs to")
            if tuple(ctx.input_shape(i)) not in allowed:
                raise ctx.error(f"'{name}' has shape {list(ctx.input_shape(i))}; give a scalar"
                                + (f" or one per output channel ({m})" if i == 3 else ""),
                                hint="give a scalar zero point" + (", or one per output channel"
                                                                    if i == 3 else " (one for the whole input)"))
    return shape, "i32"


def _conv_integer(x: np.ndarray, w: np.ndarray, x_zero_point: np.ndarray | None = None,
                  w_zero_point: np.ndarray | None = None, *, group: int,
                  kernel_shape: Ints, strides: Ints, dilations: Ints, pads: Ints) -> np.ndarray:
    """Exact: (x - x_zp) and (w - w_zp) in the narrowest type whose sums of their products
    cannot round (float32 or float64 BLAS, int64 past that; see
    :func:`~opbridge.ir.ops.quant.exact_sum_dtype`). The zero point is subtracted before
    padding, so the padded positions contribute 0 (the spec's "(x - x_zero_point) conv ...")."""
    from .quant import exact_sum_dtype, offset_bound

    m = w.shape[0]
    wi = w.astype(np.int64)
    if w_zero_point is not None:
        wi -= w_zero_point.astype(np.int64).reshape((-1,) + (1,) * (w.ndim - 1))
    dt = exact_sum_dtype(offset_bound(x.dtype, x_zero_point), np.abs(wi).reshape(m, -1).sum(axis=1))
    zp = 0 if x_zero_point is None else x_zero_point.reshape(-1)[0]
    xf = np.subtract(x, dt.type(zp), dtype=dt)  # cast and shift in one pass
    k, s, d, p = kernel_shape, strides, dilations, pads
    out_sp = [out_size(x.shape[2 + i], k[i], s[i], d[i], p[i], p[i + len(k)]) for i in range(len(k))]
    # every entry is an exact integer in range, so the cast to i32 is exact
    return direct_conv(xf, wi.astype(dt), group, k, s, d, p, out_sp).astype(np.int32)


(
    define_op("ConvInteger")
    .doc("integer convolution into i32 of (X - x_zero_point) and (W - w_zero_point); zero points "
         "are scalars (W's may be per output channel); attributes as Conv")
    .input("X", "T1").input("W", "T2").input("x_zero_point", "T1", optional=True)
    .input("w_zero_point", "T2", optional=True).output("Y", "i32")
    .param("group", "int", default=1, minimum=1, doc="number of channel groups")
    .param("kernel_shape", "ints", fill=spatial_shape_of(1), doc=_SPATIAL_DOC["kernel_shape"])
    .param("strides", "ints", fill=per_spatial_axis(1), doc=_SPATIAL_DOC["strides"])
    .param("dilations", "ints", fill=per_spatial_axis(1), doc=_SPATIAL_DOC["dilations"])
    .param("pads", "ints", fill=per_spatial_axis(0, entries=2), doc=_SPATIAL_DOC["pads"])
    .type_param("T1", ("i8", "u8")).type_param("T2", ("i8", "u8"))
    .shape_fn(_convint_shape)
    .compute(_conv_integer)
)
