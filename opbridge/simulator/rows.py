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


def row_fn(ln: Lowered, i: int, v: Value, axis: str = "H") -> Callable[[int, int], Rows]:
    """``fn(lo, hi) -> (lo, hi)``: the rows (``axis="H"``) or columns (``"W"``) of input ``i``
    that output rows [lo, hi) need (the kernel's ``input_slice`` for that axis; else one to
    one for an input of the output's extent, and the whole input otherwise)."""
    node = ln.node
    hv = extent(v, axis)
    k = ln.kernel
    fn = None if k is None else (k.input_slice_fn if axis == "H" else k.input_slice_w_fn)
    if k is not None and fn is not None:
        name = "input_slice" if axis == "H" else "input_slice_w"

        def sliced(lo: int, hi: int) -> Rows:
            s = k.hint(name, node, i, lo, hi)
            return (0, hv) if s is None else (int(s[0]), int(s[1]))

        return sliced
    if hv == extent(node.outputs[0], axis):
        return lambda lo, hi: (lo, hi)
    return lambda lo, hi: (0, hv)


def clip(s: Rows, hv: int) -> Rows:
    """Rows ``s`` clipped to a tensor of ``hv`` rows (an empty range stays empty)."""
    return (min(max(s[0], 0), hv), max(min(s[1], hv), 0))


def sliced_shape(shape: tuple[int, ...], sl: tuple[int, int, int] | None) -> tuple[int, ...]:
    """``shape`` with axis ``sl[0]`` cut to ``[sl[1], sl[2])`` (all of it for None)."""
    if sl is None:
        return shape
    axis, lo, hi = sl
    return shape[:axis] + (hi - lo,) + shape[axis + 1:]
