"""Row slicing shared by layer groups and streamed layers: which input rows output rows need."""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..ir.graph import Value
from .lower import Lowered
from .memory import view4

Rows = tuple[int, int]


def gshape(v: Value) -> tuple[int, ...]:
    """The rank-4 view of ``v`` a layer group tiles (``memory.view4``): a transformer's
    [batch, tokens, features] is cut along its tokens as an image along its rows."""
    return _view(v.shape)


@functools.lru_cache(maxsize=1024)
def _view(shape: tuple) -> tuple[int, ...]:
    # called for every tensor of every candidate group: cached by shape (compile has checked
    # that every dim is static)
    return view4(tuple(map(int, shape)))


def extent(v: Value, axis: str) -> int:
    """How many rows (``axis="H"``) or columns (``"W"``) of ``v`` a layer group cuts: those of
    its view, but for a volume (rank 5, seen as (N, C, D, H*W)) its depth slices and its H
    rows, each column of a volume's tile being one whole row of W elements (:func:`col_elems`)."""
    if len(v.shape) == 5:
        return int(v.shape[2] if axis == "H" else v.shape[3])
    return gshape(v)[2 if axis == "H" else 3]


def col_elems(v: Value) -> int:
    """Elements of the view's last axis one column of a tile holds: W for a volume (a column is
    one of its H rows), else 1."""
    return int(v.shape[4]) if len(v.shape) == 5 else 1


def row_layout(v: Value) -> bool:
    """Whether ``v`` has the row layout in local memory (rank 1 to 3), not channels over lanes."""
    return len(v.shape) < 4


def row_fn(ln: Lowered, i: int, v: Value, axis: str = "H", along: int | None = None
           ) -> Callable[[int, int], Rows]:
    """``fn(lo, hi) -> (lo, hi)``: the rows (``axis="H"``) or columns (``"W"``) of input ``i``
    that output rows [lo, hi) need (the kernel's ``input_slice`` for that axis; else one to
    one for an input of the output's extent, and the whole input otherwise). ``along``: the
    axis of the input's rank-4 view to give the range along (default the one of ``axis``);
    an ``input_slice`` answer ``(axis, lo, hi)`` on another axis (a Transpose that moves the
    rows) leaves this one whole."""
    node = ln.node
    dim = 2 if axis == "H" else 3
    along = dim if along is None else along
    hv = extent(v, axis) if along == dim else gshape(v)[along]
    k = ln.kernel
    fn = None if k is None else (k.input_slice_fn if axis == "H" else k.input_slice_w_fn)
    if k is not None and fn is not None:
        name = "input_slice" if axis == "H" else "input_slice_w"

        def sliced(lo: int, hi: int) -> Rows:
            s = k.hint(name, node, i, lo, hi)
            if s is not None and len(s) == 3:
                return (int(s[1]), int(s[2])) if int(s[0]) == along else (0, hv)
            return (0, hv) if s is None or along != dim else (int(s[0]), int(s[1]))

        return sliced
    if along == dim and hv == extent(node.outputs[0], axis):
        return lambda lo, hi: (lo, hi)
    return lambda lo, hi: (0, hv)


def slice_axis(ln: Lowered, i: int) -> int:
    """The axis of input ``i``'s rank-4 view that the output's row tiles cut: H (2), unless the
    kernel's ``input_slice`` answers ``(axis, lo, hi)`` (a Transpose that moves the rows to the
    channels or the columns)."""
    k = ln.kernel
    if k is None or k.input_slice_fn is None:
        return 2
    s = k.hint("input_slice", ln.node, i, 0, 1)
    return int(s[0]) if s is not None and len(s) == 3 else 2


def clip(s: Rows, hv: int) -> Rows:
    """Rows ``s`` clipped to a tensor of ``hv`` rows (an empty range stays empty)."""
    return (min(max(s[0], 0), hv), max(min(s[1], hv), 0))


def sliced_shape(shape: tuple[int, ...], sl: tuple[int, int, int] | None) -> tuple[int, ...]:
    """``shape`` with axis ``sl[0]`` cut to ``[sl[1], sl[2])`` (all of it for None)."""
    if sl is None:
        return shape
    axis, lo, hi = sl
    return shape[:axis] + (hi - lo,) + shape[axis + 1:]
