"""Row slicing shared by layer groups and streamed layers: which input rows output rows need."""

from __future__ import annotations

from collections.abc import Callable

from ..ir.graph import Value
from .kernels.registry import static_shape
from .lower import Lowered

Rows = tuple[int, int]


def row_fn(ln: Lowered, i: int, v: Value) -> Callable[[int, int], Rows]:
    """``fn(lo, hi) -> (lo, hi)``: the rows of input ``i`` that output rows [lo, hi) need
    (the kernel's ``input_slice``; else row to row for an input of the output's height, and
    the whole input otherwise)."""
    node = ln.node
    hv = static_shape(v)[2]
    k = ln.kernel
    if k is not None and k.input_slice_fn is not None:
        def sliced(lo: int, hi: int) -> Rows:
            s = k.hint("input_slice", node, i, lo, hi)
            return (0, hv) if s is None else (int(s[0]), int(s[1]))

        return sliced
    if hv == static_shape(node.outputs[0])[2]:
        return lambda lo, hi: (lo, hi)
    return lambda lo, hi: (0, hv)


def clip(s: Rows, hv: int) -> Rows:
    """Rows ``s`` clipped to a tensor of ``hv`` rows (an empty range stays empty)."""
    return (min(max(s[0], 0), hv), max(min(s[1], hv), 0))
