"""Tensor ops that select, join, split, pad or repeat elements (ONNX semantics and names).

Shape-like ONNX inputs (Split's split, Slice's starts/ends/axes/steps, Pad's pads, Tile's
repeats) are attributes here; data-dependent operands (Gather's indices) stay inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np

from ..dims import ceil_div
from ..opdef import ShapeContext, define_op, every_axis
from ..types import Dim, is_static
from .common import ALL, LOWP
from .shape import INDEX, check_axes, static_shape


# -- Concat --------------------------------------------------------------------------------
def _concat_shape(ctx: ShapeContext) -> Any:
    shapes = [ctx.input_shape(i) for i in range(ctx.num_inputs)]
    r = len(shapes[0])
    axis = ctx.normalize_axis(ctx.attr("axis"), r)
    for i, s in enumerate(shapes):
        if len(s) != r or any(not ctx.dims_equal(a, b) for k, (a, b) in enumerate(zip(s, shapes[0]))
                              if k != axis):
            raise ctx.error(f"input {i} has shape {list(s)}, input 0 has {list(shapes[0])}; "
                            f"they may differ only on axis {axis}",
                            hint="the inputs must agree on every axis but the concatenation axis: check the "
                                 "input shapes (--input-shape) and the layers that make them")
    out = list(shapes[0])
    out[axis] = ctx.dim_add(*(s[axis] for s in shapes))
    return tuple(out), ctx.input_dtype(0)


(
    define_op("Concat")
    .doc("Join the inputs along `axis`.")
    .input("inputs", "T", variadic=True).output("y", "T")
    .param("axis", "int")
    .type_param("T", ALL + LOWP)
    .shape_fn(_concat_shape)
    .compute(lambda *xs, axis: np.concatenate(xs, axis=axis))
)


# -- Split ---------------------------------------------------------------------------------
def split_sizes(dim: int, split: Sequence[int], num_outputs: int | None) -> list[int] | str:
    """Sizes of Split's pieces, or the reason they cannot be made.

    ``split`` gives them; when it is empty, ``num_outputs`` pieces of ceil(dim / n) each,
    the last one smaller when the axis does not divide (ONNX Split-18's num_outputs rule).
    """
    if split:
        if num_outputs and num_outputs != len(split):
            return f"split {list(split)} has {len(split)} entries but num_outputs is {num_outputs}"
        if sum(split) != dim:
            return f"split {list(split)} must sum to the axis size {dim}"
        return list(split)
    if not num_outputs:
        return "is empty and the number of outputs is not given"
    chunk = -(-dim // num_outputs)
    last = dim - chunk * (num_outputs - 1)
    if last < 0:
        return f"an axis of size {dim} cannot be split into {num_outputs} pieces of {chunk}"
    return [chunk] * (num_outputs - 1) + [last]


def _split_shape(ctx: ShapeContext) -> Any:
    shape = static_shape(ctx)
    axis = ctx.normalize_axis(ctx.attr("axis"), len(shape))
    split = ctx.attr("split")
    sizes = split_sizes(shape[axis], split, None) if split else "is empty"
    if isinstance(sizes, str):
        raise ctx.error(sizes, attr="split", hint="give one size per output; they must sum "
                        f"to the axis size {shape[axis]}")
    return [(shape[:axis] + (s,) + shape[axis + 1:], ctx.input_dtype(0)) for s in sizes]


def _split(x: np.ndarray, axis: int, split: tuple[int, ...]) -> tuple:
    return tuple(np.split(x, np.cumsum(split)[:-1], axis=axis))


(
    define_op("Split")
    .doc("Cut x along `axis` into pieces of the sizes in `split`. ONNX's num_outputs is not an "
         "attribute (the name is GraphBuilder.op's output-count keyword): mappings give explicit "
         "sizes (see split_sizes).")
    .input("x", "T").output("outputs", "T", variadic=True, count="split")
    .param("axis", "int", 0)
    .param("split", "ints", minimum=0, doc="piece sizes, one per output")
    .type_param("T", ALL)
    .shape_fn(_split_shape)
    .compute(_split)
)


# -- Slice ---------------------------------------------------------------------------------
def slice_bounds(shape: Sequence[int], starts: Sequence[int], ends: Sequence[int],
                 axes: Sequence[int], steps: Sequence[int]) -> list[slice]:
    """One Python slice per dim under ONNX's clamping (negative steps, INT64 sentinels)."""
    out = [slice(None)] * len(shape)
    for a, s, e, st in zip(axes, starts, ends, steps):
        d = shape[a]
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
        out[a] = slice(s, e if e >= 0 else None, st)
    return out


def _slice_params(ctx: ShapeContext, rank: int) -> tuple[list[int], list[int]]:
    starts, ends = ctx.attr("starts"), ctx.attr("ends")
    axes, steps = ctx.attr("axes"), ctx.attr("steps")
    for name, v in (("ends", ends), ("axes", axes), ("steps", steps)):
        if len(v) != len(starts):
            raise ctx.error(f"has {len(v)} entries, starts has {len(starts)}", attr=name,
                            hint="starts, ends, axes and steps must have one entry per sliced axis")
    if 0 in steps:
        raise ctx.error(f"{list(steps)} has a 0 step", attr="steps",
                        hint="a step of 0 never advances: correct the Slice's steps")
    return check_axes(ctx, axes, rank), list(steps)


def _slice_len(sl: slice, d: int) -> int:
    return len(range(*sl.indices(d)))


# an end at least this large slices to the end of a symbolic dim: exporters write INT64_MAX,
# INT32_MAX or 2**40 there, and no real axis is longer (the run checks the declared dim anyway)
TO_THE_END = (1 << 31) - 1


def _slice_shape(ctx: ShapeContext) -> Any:
    shape = ctx.input_shape(0)
    axes, steps = _slice_params(ctx, len(shape))
    starts, ends = ctx.attr("starts"), ctx.attr("ends")
    # a symbolic dim stands in as a huge one: a slice that keeps all of it keeps the symbol
    big = 1 << 62
    proxy = [d if isinstance(d, int) else big for d in shape]
    sl = slice_bounds(proxy, starts, ends, axes, steps)
    tails = {a: (st0, st) for a, st0, e, st in zip(axes, starts, ends, steps)
             if st > 0 and st0 >= 0 and e >= TO_THE_END}
    out: list[Dim] = []
    for i, (s, d, p) in enumerate(zip(sl, shape, proxy)):
        n = _slice_len(s, p)
        if isinstance(d, int):
            out.append(n)
        elif n == big:  # all of it keeps the symbol
            out.append(d)
        elif i in tails:  # from a start to the end by a step: ceil((d - start) / step)
            out.append(ceil_div(ctx.dim_sub(d, tails[i][0]), tails[i][1]))
        else:  # any other part is known when the dim is
            out.append(ctx.runtime_dim(f"axis{len(out)}"))
    return tuple(out), ctx.input_dtype(0)


def _slice(x: np.ndarray, starts: tuple, ends: tuple, axes: tuple, steps: tuple) -> np.ndarray:
    axes = tuple(a % x.ndim for a in axes)
    return np.array(x[tuple(slice_bounds(x.shape, starts, ends, axes, steps))])


(
    define_op("Slice")
    .doc("x[starts:ends:steps] on `axes`, with ONNX clamping of out-of-range bounds.")
    .input("x", "T").output("y", "T")
    .param("starts", "ints").param("ends", "ints")
    .param("axes", "ints", fill=lambda ins, a: tuple(range(len(a["starts"]))),
           doc="absent: 0 .. len(starts)-1")
    .param("steps", "ints", fill=lambda ins, a: (1,) * len(a["starts"]), doc="absent: all 1")
    .type_param("T", ALL + LOWP)
    .shape_fn(_slice_shape)
    .compute(_slice)
)


# -- Pad -----------------------------------------------------------------------------------
def pad_widths(rank: int, pads: Sequence[int], axes: Sequence[int]) -> list[tuple[int, int]]:
    """(begin, end) per dim from ONNX's [b1, b2, ..., e1, e2, ...] over ``axes``."""
    widths = [(0, 0)] * rank
    n = len(axes)
    for i, a in enumerate(axes):
        widths[a] = (pads[i], pads[n + i])
    return widths


def _pad_shape(ctx: ShapeContext) -> Any:
    shape = ctx.input_shape(0)
    r = len(shape)
    axes = check_axes(ctx, ctx.attr("axes"), r)
    pads, mode = ctx.attr("pads"), ctx.attr("mode")
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"has {len(pads)} entries; it needs 2 per padded axis ({2 * len(axes)})",
                        attr="pads", hint="pads is [begin_0, begin_1, ..., end_0, end_1, ...]")
    if not is_static(shape):  # the run checks what only the sizes can tell
        widths = pad_widths(r, pads, axes)
        return tuple(ctx.dim_add(d, b, e) for d, (b, e) in zip(shape, widths)), ctx.input_dtype(0)
    out = []
    for d, (b, e) in zip((int(d) for d in shape), pad_widths(r, pads, axes)):
        cropped = d + min(b, 0) + min(e, 0)
        if cropped < 0:
            raise ctx.error(f"{list(pads)} crops more than the axis size {d}", attr="pads",
                            hint="use smaller negative pads, or a larger input (--input-shape)")
        big = max(b, e, 0)
        if mode != "constant" and big and cropped == 0:
            raise ctx.error(f"mode '{mode}' cannot pad an empty axis", attr="pads",
                            hint="pad a non-empty axis, or use mode 'constant'")
        if mode == "reflect" and big > cropped - 1:
            raise ctx.error(f"{list(pads)}: reflect padding of {big} needs an axis longer than "
                            f"{big} (it has {cropped})", attr="pads",
                            hint="use smaller pads, or a larger input (--input-shape)")
        out.append(d + b + e)
    return tuple(out), ctx.input_dtype(0)


PadMode = Literal["constant", "reflect", "edge", "wrap"]


def _pad(x: np.ndarray, pads: tuple[int, ...], mode: PadMode, value: float,
         axes: tuple[int, ...]) -> np.ndarray:
    """Pad's compute; ``mode`` is one of the param's ``allowed`` values, checked before this runs."""
    widths = pad_widths(x.ndim, pads, [a % x.ndim for a in axes])
    # negative pads crop first, then the rest pads the cropped tensor (as onnxruntime does)
    x = x[tuple(slice(-min(b, 0), d + min(e, 0)) for d, (b, e) in zip(x.shape, widths))]
    pos = [(max(b, 0), max(e, 0)) for b, e in widths]
    if mode == "constant":
        return np.pad(x, pos, mode="constant", constant_values=np.array(value).astype(x.dtype))
    return np.pad(x, pos, mode=mode)


(
    define_op("Pad")
    .doc("Pad (or, with negative pads, crop) x; modes constant|reflect|edge|wrap.")
    .input("x", "T").output("y", "T")
    .param("pads", "ints", doc="[begin per axis..., end per axis...]; negative crops")
    .param("mode", "str", "constant", allowed=get_args(PadMode))
    .param("value", "float", 0.0, doc="fill value of mode constant")
    .param("axes", "ints", fill=every_axis(0), doc="the axes pads refers to; absent: all")
    .type_param("T", ALL)
    .shape_fn(_pad_shape)
    .compute(_pad)
)


def normalize_indices(idx: np.ndarray, dim: int, what: str = "index") -> np.ndarray:
    """Indices in [-dim, dim) made non-negative; IndexError (reported with the node) otherwise."""
    idx = np.asarray(idx).astype(np.int64)
    bad = (idx < -dim) | (idx >= dim)
    if bad.any():
        raise IndexError(f"{what} {int(idx[bad].flat[0])} is out of range [{-dim}, {dim})")
    return np.where(idx < 0, idx + dim, idx)


def check_const_indices(ctx: ShapeContext, i: int, dim: int) -> None:
    """When input ``i`` is a constant, its indices must lie in [-dim, dim)."""
    data = ctx.input_const(i)
    if data is not None and data.size and (data.min() < -dim or data.max() >= dim):
        raise ctx.error(f"indices span [{data.min()}, {data.max()}], outside [{-dim}, {dim})",
                        hint="indices must index the gathered axis")



# -- Gather family -------------------------------------------------------------------------
def _gather_shape(ctx: ShapeContext) -> Any:
    shape, idx = ctx.input_shape(0), ctx.input_shape(1)
    axis = ctx.normalize_axis(ctx.attr("axis"), len(shape))
    size = shape[axis]
    if isinstance(size, int):
        check_const_indices(ctx, 1, size)
    return shape[:axis] + tuple(idx) + shape[axis + 1:], ctx.input_dtype(0)


def _gather(x: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    axis %= x.ndim
    return np.take(x, normalize_indices(indices, x.shape[axis]), axis=axis)


(
    define_op("Gather")
    .doc("Take the entries of x at `indices` along `axis` (negative indices count from the end).")
    .input("x", "T").input("indices", "I").output("y", "T")
    .param("axis", "int", 0)
    .type_param("T", ALL + LOWP).type_param("I", INDEX)
    .shape_fn(_gather_shape)
    .compute(_gather)
)


def _elements_shape(ctx: ShapeContext) -> Any:
    shape, idx = static_shape(ctx), static_shape(ctx, 1)
    axis = ctx.normalize_axis(ctx.attr("axis"), len(shape))
    if len(idx) != len(shape):
        raise ctx.error(f"indices have rank {len(idx)}, data rank {len(shape)}; they must match",
                        hint="give indices of the data's rank")
    check_const_indices(ctx, 1, shape[axis])
    if ctx.num_inputs > 2 and tuple(ctx.input_shape(2)) != idx:
        raise ctx.error(f"updates have shape {list(ctx.input_shape(2))}, indices {list(idx)}; "
                        "they must match",
                        hint="give updates of the indices' shape")
    return (idx if ctx.num_inputs == 2 else shape), ctx.input_dtype(0)


def _gather_elements(x: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    axis %= x.ndim
    return np.take_along_axis(x, normalize_indices(indices, x.shape[axis]), axis=axis)


(
    define_op("GatherElements")
    .doc("y[i][j]... = x[...][indices[i][j]...][...] with the index on `axis`.")
    .input("x", "T").input("indices", "I").output("y", "T")
    .param("axis", "int", 0)
    .type_param("T", ALL).type_param("I", INDEX)
    .shape_fn(_elements_shape)
    .compute(_gather_elements)
)


def _nd_parts(ctx: ShapeContext) -> tuple[tuple[Dim, ...], tuple[Dim, ...], int, int]:
    data, idx = ctx.input_shape(0), ctx.input_shape(1)
    b = ctx.attr("batch_dims") if "batch_dims" in ctx.opdef.params else 0
    if len(idx) < 1 or b >= min(len(data), len(idx)):
        raise ctx.error(f"indices {list(idx)} and data {list(data)} leave no dims past "
                        f"batch_dims = {b}", attr="batch_dims" if b else None,
                        hint="indices' last dim plus batch_dims must not exceed the data's rank: check "
                             "indices' shape")
    k = idx[-1]
    if not isinstance(k, int):
        raise ctx.error(f"indices {list(idx)}: the last dim (the index length) must be static",
                        hint="give indices whose last dim is a fixed number")
    if not all(ctx.dims_equal(x, y) for x, y in zip(data[:b], idx[:b])) or not 1 <= k <= len(data) - b:
        raise ctx.error(f"indices {list(idx)} do not fit data {list(data)}: the batch dims must "
                        f"match and indices.shape[-1] must be in [1, {len(data) - b}]",
                        hint="check indices' shape against the data's (and batch_dims)")
    return data, idx, b, k


def _gather_nd_shape(ctx: ShapeContext) -> Any:
    data, idx, b, k = _nd_parts(ctx)
    return idx[:-1] + data[b + k:], ctx.input_dtype(0)


def _nd_index(indices: np.ndarray, dims: Sequence[int]) -> tuple[np.ndarray, ...]:
    """The index tuple for numpy from [..., k] ND indices, negatives resolved."""
    flat = np.asarray(indices).reshape(-1, len(dims))
    return tuple(normalize_indices(flat[:, j], d) for j, d in enumerate(dims))


def _gather_nd(x: np.ndarray, indices: np.ndarray, batch_dims: int) -> np.ndarray:
    b, k = batch_dims, indices.shape[-1]
    nb = int(np.prod(x.shape[:b], dtype=np.int64))
    xb = x.reshape((nb,) + x.shape[b:])
    ib = indices.reshape((nb, -1, k))
    parts = [xb[i][_nd_index(ib[i], x.shape[b:b + k])] for i in range(nb)]
    return np.stack(parts).reshape(indices.shape[:-1] + x.shape[b + k:])


(
    define_op("GatherND")
    .doc("Gather slices of x addressed by the last dim of `indices`, after `batch_dims` batch dims.")
    .input("x", "T").input("indices", "i64").output("y", "T")
    .param("batch_dims", "int", 0, minimum=0)
    .type_param("T", ALL)
    .shape_fn(_gather_nd_shape)
    .compute(_gather_nd)
)


# -- Scatter family ------------------------------------------------------------------------
REDUCTIONS = ("none", "add", "mul", "max", "min")
_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(out: np.ndarray, where: tuple[np.ndarray, ...], upd: np.ndarray,
             reduction: str) -> np.ndarray:
    if reduction == "none":
        out[where] = upd
    else:
        _UFUNC[reduction].at(out, where, upd)
    return out


def _scatter_nd_shape(ctx: ShapeContext) -> Any:
    data, idx, _, k = _nd_parts(ctx)
    want = idx[:-1] + data[k:]
    if tuple(ctx.input_shape(2)) != want:
        raise ctx.error(f"updates have shape {list(ctx.input_shape(2))}; data {list(data)} and "
                        f"indices {list(idx)} need {list(want)}",
                        hint="give updates of the shape the data and indices need")
    return data, ctx.input_dtype(0)


def _scatter_nd(x: np.ndarray, indices: np.ndarray, updates: np.ndarray,
                reduction: str) -> np.ndarray:
    k = indices.shape[-1]
    where = _nd_index(indices, x.shape[:k])
    upd = updates.reshape((-1,) + x.shape[k:])
    return _scatter(x.copy(), where, upd, reduction)


(
    define_op("ScatterND")
    .doc("A copy of x with the slices addressed by `indices` replaced (or reduced) by `updates`.")
    .input("x", "T").input("indices", "i64").input("updates", "T").output("y", "T")
    .param("reduction", "str", "none", allowed=REDUCTIONS)
    .type_param("T", ALL)
    .shape_fn(_scatter_nd_shape)
    .compute(_scatter_nd)
)


def _scatter_elements(x: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int,
                      reduction: str) -> np.ndarray:
    axis %= x.ndim
    grid: list[np.ndarray] = list(np.indices(indices.shape, sparse=True))
    grid[axis] = normalize_indices(indices, x.shape[axis])
    return _scatter(x.copy(), tuple(grid), updates, reduction)


(
    define_op("ScatterElements")
    .doc("A copy of x with x[..., indices[i,j,...], ...] (on `axis`) set to (or reduced with) "
         "updates[i,j,...].")
    .input("x", "T").input("indices", "I").input("updates", "T").output("y", "T")
    .param("axis", "int", 0)
    .param("reduction", "str", "none", allowed=REDUCTIONS)
    .type_param("T", ALL).type_param("I", INDEX)
    .shape_fn(_elements_shape)
    .compute(_scatter_elements)
)
