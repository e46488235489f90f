"""Shape ops: ops that change how a tensor's elements are arranged, never their values.

ONNX semantics and names; the shape-like operands ONNX passes as inputs (Reshape's shape,
Unsqueeze's axes, Expand's shape) are attributes here, since IR graphs are static.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ShapeError
from ..dims import divide_exact
from ..opdef import ShapeContext, define_op
from ..types import Dim, is_static
from .common import ALL, LOWP, broadcast_shapes

INDEX = ("i32", "i64")


def check_axes(ctx: ShapeContext, axes: Sequence[int], rank: int, attr: str = "axes") -> list[int]:
    """``axes`` made non-negative; an error naming ``attr`` if one is out of range or repeated."""
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise ctx.error(f"axis {a} is out of range for rank {rank}", attr=attr,
                            hint=f"use axes in [{-rank}, {rank - 1}]")
        out.append(a % rank)
    if len(set(out)) != len(out):
        raise ctx.error(f"{list(axes)} names an axis twice", attr=attr,
                        hint="name each axis once")
    return out


def static_shape(ctx: ShapeContext, i: int = 0) -> tuple[int, ...]:
    """Input ``i``'s shape, which must be static (an error naming the node otherwise)."""
    shape = ctx.input_shape(i)
    if not is_static(shape):
        raise ctx.error(f"input {i} has symbolic shape {list(shape)}; this op needs static dims",
                        hint="fix the input shapes first (--input-shape)")
    return tuple(int(d) for d in shape)


# -- Reshape -------------------------------------------------------------------------------
def reshape_target(ctx: ShapeContext) -> tuple[Dim, ...]:
    """The output shape of Reshape under ONNX rules (0 copies a dim unless allowzero, -1 infers)."""
    src = ctx.input_shape(0)
    shape, allowzero = ctx.attr("shape"), ctx.attr("allowzero")
    if any(d < -1 for d in shape):
        raise ctx.error(f"{list(shape)} has a dim below -1", attr="shape",
                        hint="correct the target shape the model gives (dims >= 0, or -1 for the one to "
                             "infer)")
    if shape.count(-1) > 1:
        raise ctx.error(f"{list(shape)} has more than one -1", attr="shape",
                        hint="only one dim can be inferred")
    if allowzero and 0 in shape and -1 in shape:
        raise ctx.error(f"{list(shape)} has both 0 and -1 with allowzero=1", attr="shape",
                        hint="correct the target shape the model gives: with allowzero=1 a 0 is a real 0, "
                             "so -1 has nothing to infer from")
    out: list[Dim] = []
    for i, d in enumerate(shape):
        if d == 0 and not allowzero:
            if i >= len(src):
                raise ctx.error(f"{list(shape)}: 0 at position {i} copies a dim the input "
                                f"(rank {len(src)}) does not have", attr="shape",
                                hint="correct the target shape the model gives (0 copies the input's dim at "
                                     "that position)")
            out.append(src[i])
        else:
            out.append(d)
    if not is_static(src) or not is_static(tuple(out)):
        if -1 in out:
            total, known = ctx.dim_mul(*src), ctx.dim_mul(*(d for d in out if d != -1))
            inferred = divide_exact(total, known) if known != 0 else None
            if inferred is None and isinstance(known, int) and known > 0:
                # not provably exact: the run's reshape fails with the sizes if it is not
                inferred = ctx.dim_floordiv(total, known)
            if inferred is None:
                raise ctx.error(f"cannot infer {list(shape)} from symbolic input {list(src)}",
                                attr="shape", hint="fix the input shapes first (--input-shape)")
            out[out.index(-1)] = inferred
        return tuple(out)
    total = math.prod(int(d) for d in src)
    known = math.prod(int(d) for d in out if d != -1)
    if -1 in out:
        if known == 0 or total % known:
            raise ctx.error(f"cannot reshape {list(src)} ({total} elements) to {list(shape)}",
                            attr="shape", hint="the product of the dims must match")
        out[out.index(-1)] = total // known
    elif known != total:
        raise ctx.error(f"cannot reshape {list(src)} ({total} elements) to {list(shape)} "
                        f"({known} elements)", attr="shape",
                        hint="the product of the dims must match")
    return tuple(out)


(
    define_op("Reshape")
    .doc("The same elements in a new shape; ONNX rules: 0 copies the input dim, -1 is inferred.")
    .input("x", "T").output("y", "T")
    .param("shape", "ints", doc="target shape (ONNX's second input)")
    .param("allowzero", "int", 0, allowed=(0, 1), doc="1: a 0 in shape is a real 0-sized dim")
    .type_param("T", ALL + LOWP)
    .shape_fn(lambda ctx: (reshape_target(ctx), ctx.input_dtype(0)))
    .compute(lambda x, shape, allowzero: np.reshape(
        x, [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(shape)]))
)


# -- Flatten -------------------------------------------------------------------------------
def _flatten_shape(ctx: ShapeContext) -> Any:
    shape = ctx.input_shape(0)
    r, axis = len(shape), ctx.attr("axis")
    if not -r <= axis <= r:
        raise ctx.error(f"{axis} is out of range for rank {r}", attr="axis",
                        hint=f"use an axis in [{-r}, {r}]")
    axis = axis + r if axis < 0 else axis
    return (ctx.dim_mul(*shape[:axis]), ctx.dim_mul(*shape[axis:])), ctx.input_dtype(0)


def _flatten(x: np.ndarray, axis: int) -> np.ndarray:
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


(
    define_op("Flatten")
    .doc("2-D view: dims before `axis` become rows, the rest columns.")
    .input("x", "T").output("y", "T")
    .param("axis", "int", 1)
    .type_param("T", ALL + LOWP)
    .shape_fn(_flatten_shape)
    .compute(_flatten)
)


# -- Squeeze / Unsqueeze -------------------------------------------------------------------
def _squeeze_axes(ctx: ShapeContext) -> list[int]:
    shape = ctx.input_shape(0)
    axes = ctx.attr("axes")
    if not axes:
        return [i for i, d in enumerate(shape) if d == 1]
    norm = check_axes(ctx, axes, len(shape))
    for a in norm:
        if shape[a] != 1:
            raise ctx.error(f"axis {a} has size {shape[a]}, not 1; it cannot be squeezed",
                            attr="axes",
                            hint="squeeze only axes of size 1: check the axes, and the input's shape "
                                 "(--input-shape)")
    return norm


def _squeeze_shape(ctx: ShapeContext) -> Any:
    drop = set(_squeeze_axes(ctx))
    shape = ctx.input_shape(0)
    return tuple(d for i, d in enumerate(shape) if i not in drop), ctx.input_dtype(0)


def _squeeze(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    if not axes:
        return x.reshape([d for d in x.shape if d != 1])
    return np.squeeze(x, axis=tuple(a % x.ndim for a in axes))


(
    define_op("Squeeze")
    .doc("Remove size-1 dims: those in `axes`, or every one when `axes` is empty.")
    .input("x", "T").output("y", "T")
    .param("axes", "ints", (), doc="empty: every size-1 dim")
    .type_param("T", ALL + LOWP)
    .shape_fn(_squeeze_shape)
    .compute(_squeeze)
)


def _unsqueeze_shape(ctx: ShapeContext) -> Any:
    shape = ctx.input_shape(0)
    axes = ctx.attr("axes")
    if not axes:
        raise ctx.error("is empty", attr="axes", hint="give at least one axis to insert")
    r = len(shape) + len(axes)
    norm = set(check_axes(ctx, axes, r))
    src = iter(shape)
    return tuple(1 if i in norm else next(src) for i in range(r)), ctx.input_dtype(0)


def _unsqueeze(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    r = x.ndim + len(axes)
    return np.expand_dims(x, tuple(sorted(a % r for a in axes)))


(
    define_op("Unsqueeze")
    .doc("Insert size-1 dims at `axes` (positions in the output).")
    .input("x", "T").output("y", "T")
    .param("axes", "ints")
    .type_param("T", ALL + LOWP)
    .shape_fn(_unsqueeze_shape)
    .compute(_unsqueeze)
)


# -- Transpose -----------------------------------------------------------------------------
def _perm(ctx: ShapeContext) -> list[int]:
    r = ctx.input_rank(0)
    perm = ctx.attr("perm")
    if sorted(perm) != list(range(r)):
        raise ctx.error(f"{list(perm)} is not a permutation of 0..{r - 1}", attr="perm",
                        hint=f"give each of the {r} axes exactly once")
    return list(perm)


(
    define_op("Transpose")
    .doc("Permute the dims; `perm` absent reverses them.")
    .input("x", "T").output("y", "T")
    .param("perm", "ints", fill=lambda ins, a: None if ins[0] is None else tuple(range(len(ins[0][0])))[::-1],
           doc="absent: reverse the dims")
    .type_param("T", ALL + LOWP)
    .shape_fn(lambda ctx: (tuple(ctx.input_shape(0)[p] for p in _perm(ctx)), ctx.input_dtype(0)))
    .compute(lambda x, perm: np.transpose(x, perm))
)


# -- Expand --------------------------------------------------------------------------------
def _expand_shape(ctx: ShapeContext) -> Any:
    shape = ctx.attr("shape")
    if any(d < 0 for d in shape):
        raise ctx.error(f"{list(shape)} has a negative dim", attr="shape",
                        hint="dims must be >= 0: check the shape input")
    src = ctx.input_shape(0)
    try:
        out = broadcast_shapes([src, tuple(shape)], ctx.where)
    except ShapeError:
        raise ctx.error(f"input shape {list(src)} does not broadcast with {list(shape)}",
                        attr="shape", hint="each dim pair must be equal or contain a 1") from None
    return out, ctx.input_dtype(0)


(
    define_op("Expand")
    .doc("Broadcast x against `shape` (numpy rules, both ways).")
    .input("x", "T").output("y", "T")
    .param("shape", "ints")
    .type_param("T", ALL + LOWP)
    .shape_fn(_expand_shape)
    .compute(lambda x, shape: np.array(np.broadcast_to(x, np.broadcast_shapes(x.shape, shape))))
)


# -- Shape / Size --------------------------------------------------------------------------
def shape_range(rank: int, start: int, end: int | None) -> tuple[int, int]:
    """ONNX Shape's start/end: negative counts from the back, both clamped to [0, rank]."""
    def clamp(v: int) -> int:
        return min(max(v + rank if v < 0 else v, 0), rank)

    return clamp(start), clamp(rank if end is None else end)


def _shape_shape(ctx: ShapeContext) -> Any:
    s, e = shape_range(ctx.input_rank(0), ctx.attr("start"), ctx.attr("end"))
    return (max(e - s, 0),), "i64"


def _shape(x: np.ndarray, start: int, end: int | None) -> np.ndarray:
    s, e = shape_range(x.ndim, start, end)
    return np.array(x.shape[s:e], dtype=np.int64)


(
    define_op("Shape")
    .doc("The input's dims [start, end) as i64; a constant once shapes are static.")
    .input("x", "T").output("shape", "i64")
    .param("start", "int", 0)
    .param("end", "int", None, doc="absent (None): up to the last dim")
    .type_param("T", ALL)
    .shape_fn(_shape_shape)
    .compute(_shape)
)

(
    define_op("Size")
    .doc("The number of elements of x, as an i64 scalar.")
    .input("x", "T").output("size", "i64")
    .type_param("T", ALL)
    .shape_fn(lambda ctx: ((), "i64"))
    .compute(lambda x: np.array(x.size, dtype=np.int64))
)


# -- DepthToSpace / SpaceToDepth -----------------------------------------------------------
def _d2s_shape(ctx: ShapeContext) -> Any:
    shape = static_shape(ctx)
    b = ctx.attr("blocksize")
    if len(shape) != 4:
        raise ctx.error(f"input has rank {len(shape)}; DepthToSpace needs NCHW (rank 4)",
                        hint="the op takes NCHW input: check the input's shape (--input-shape) and the "
                             "layer before")
    n, c, h, w = shape
    if c % (b * b):
        raise ctx.error(f"channels {c} are not divisible by blocksize^2 = {b * b}",
                        attr="blocksize",
                        hint="the channels must be a multiple of blocksize^2: check blocksize and the "
                             "input's channels (--input-shape)")
    return (n, c // (b * b), h * b, w * b), ctx.input_dtype(0)


def _d2s(x: np.ndarray, blocksize: int, mode: str) -> np.ndarray:
    n, c, h, w = x.shape
    b = blocksize
    if mode == "DCR":  # depth is (b_h, b_w, c_out)
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:  # CRD: depth is (c_out, b_h, b_w)
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


(
    define_op("DepthToSpace")
    .doc("Move channel blocks into blocksize x blocksize spatial tiles (NCHW).")
    .input("x", "T").output("y", "T")
    .param("blocksize", "int", minimum=1)
    .param("mode", "str", "DCR", allowed=("DCR", "CRD"))
    .type_param("T", ALL)
    .shape_fn(_d2s_shape)
    .compute(_d2s)
)


def _s2d_shape(ctx: ShapeContext) -> Any:
    shape = static_shape(ctx)
    b = ctx.attr("blocksize")
    if len(shape) != 4:
        raise ctx.error(f"input has rank {len(shape)}; SpaceToDepth needs NCHW (rank 4)",
                        hint="the op takes NCHW input: check the input's shape (--input-shape) and the "
                             "layer before")
    n, c, h, w = shape
    if h % b or w % b:
        raise ctx.error(f"spatial dims {h}x{w} are not divisible by {b}", attr="blocksize",
                        hint="height and width must be multiples of blocksize: check blocksize and the "
                             "input's shape (--input-shape)")
    return (n, c * b * b, h // b, w // b), ctx.input_dtype(0)


def _s2d(x: np.ndarray, blocksize: int, mode: str) -> np.ndarray:
    n, c, h, w = x.shape
    b = blocksize
    t = x.reshape(n, c, h // b, b, w // b, b)
    if mode == "DCR":  # depth becomes (b_h, b_w, c)
        t = t.transpose(0, 3, 5, 1, 2, 4)
    else:  # CRD: depth becomes (c, b_h, b_w)
        t = t.transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


(
    define_op("SpaceToDepth")
    .doc("Move blocksize x blocksize spatial tiles into channels (NCHW); inverse of DepthToSpace.")
    .input("x", "T").output("y", "T")
    .param("blocksize", "int", minimum=1)
    .param("mode", "str", "DCR", allowed=("DCR", "CRD"))
    .type_param("T", ALL)
    .shape_fn(_s2d_shape)
    .compute(_s2d)
)


# -- Tile ----------------------------------------------------------------------------------
def _tile_shape(ctx: ShapeContext) -> Any:
    shape = ctx.input_shape(0)
    reps = ctx.attr("repeats")
    if len(reps) != len(shape):
        raise ctx.error(f"has {len(reps)} entries for an input of rank {len(shape)}",
                        attr="repeats", hint="give one repeat count per dim")
    return tuple(ctx.dim_mul(d, r) for d, r in zip(shape, reps)), ctx.input_dtype(0)


(
    define_op("Tile")
    .doc("Repeat x `repeats[i]` times along each dim i.")
    .input("x", "T").output("y", "T")
    .param("repeats", "ints", minimum=0)
    .type_param("T", ALL)
    .shape_fn(_tile_shape)
    .compute(lambda x, repeats: np.tile(x, repeats))
)


# -- ReverseSequence -----------------------------------------------------------------------
def _revseq_shape(ctx: ShapeContext) -> Any:
    shape = static_shape(ctx)
    b, t = ctx.attr("batch_axis"), ctx.attr("time_axis")
    if len(shape) < 2:
        raise ctx.error(f"input has rank {len(shape)}; ReverseSequence needs rank >= 2",
                        hint="check the input's shape: the op takes (batch, time, ...) or (time, batch, "
                             "...) tensors")
    if b == t:
        raise ctx.error(f"batch_axis and time_axis are both {b}", attr="time_axis",
                        hint="batch_axis and time_axis must differ (one is 0, the other 1)")
    lens = ctx.input_shape(1)
    if tuple(lens) != (shape[b],):
        raise ctx.error(f"sequence_lens has shape {list(lens)}; it needs one entry per batch "
                        f"item ({shape[b]})",
                        hint="give sequence_lens one entry per batch item")
    return ctx.same_as_input(0)


def _revseq(x: np.ndarray, lens: np.ndarray, batch_axis: int, time_axis: int) -> np.ndarray:
    y = np.moveaxis(x, (batch_axis, time_axis), (0, 1)).copy()
    for i, n in enumerate(lens):
        n = int(n)
        if not 0 <= n <= y.shape[1]:
            raise IndexError(f"sequence_lens[{i}] = {n} is outside [0, {y.shape[1]}]")
        y[i, :n] = y[i, :n][::-1]
    return np.moveaxis(y, (0, 1), (batch_axis, time_axis))


(
    define_op("ReverseSequence")
    .doc("Reverse the first sequence_lens[b] steps along time_axis for each batch item b.")
    .input("x", "T").input("sequence_lens", "I").output("y", "T")
    .param("batch_axis", "int", 1, allowed=(0, 1))
    .param("time_axis", "int", 0, allowed=(0, 1))
    .type_param("T", ALL).type_param("I", INDEX)
    .shape_fn(_revseq_shape)
    .compute(_revseq)
)
