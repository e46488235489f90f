"""``aten::repeat_interleave``: each element (or slice along ``dim``) repeated its count.

One count for every element is a broadcast: Unsqueeze after ``dim``, Expand that new axis to
the count and Reshape it into ``dim`` (copies only, and no constant as large as the output);
per-element counts are a Gather with the indices worked out while converting.

The output's size is the sum of the counts, so the counts must be known while converting (a
constant, a parameter, a number): counts computed at run time would give a data-dependent shape.
Overloads (https://pytorch.org/docs/stable/generated/torch.repeat_interleave.html):
``repeat_interleave.self_int(self, repeats, dim=None, output_size=None)``, ``.self_Tensor`` (the
same with a 0-d or 1-d tensor of counts) and ``.Tensor(repeats, output_size=None)``, which returns
the indices ``0..n-1`` each repeated its count.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, norm_axis, static_shape, ts_mapping
from .shape import reshape_to


def _counts(g: MapContext, repeats: Any, n: int | None) -> np.ndarray:
    """The counts as a 1-d int64 array (one per index; a single count repeats for all ``n``),
    or an error saying what torch requires."""
    arr = np.asarray(repeats)
    if arr.dtype.kind not in "iu" or arr.ndim > 1:
        raise g.error(f"repeats = {arr.tolist()!r}: an int or a 0-d/1-d integer tensor is needed",
                      attr="repeats")
    if (arr < 0).any():
        raise g.error(f"repeats = {arr.tolist()!r}: the counts must be >= 0", attr="repeats")
    flat = arr.reshape(-1).astype(np.int64)
    if n is None:
        return flat
    if flat.size == 1:
        return np.full(n, int(flat[0]), np.int64)
    if flat.size != n:
        raise g.error(f"repeats has {flat.size} counts for a dim of size {n}: one count, or one "
                      "per element, is needed", attr="repeats")
    return flat


def _check_output_size(g: MapContext, a: Args, pos: int, counts: np.ndarray) -> None:
    size = a.int(pos, None, what="output_size")
    if size is not None and size != int(counts.sum()):
        raise g.error(f"output_size = {size}, but the counts sum to {int(counts.sum())}",
                      attr="output_size")


def _repeat_each(g: MapContext, x: Any, shape: tuple[int, ...], axis: int, count: int) -> Any:
    """``x`` with every slice along ``axis`` repeated ``count`` times, by broadcasting."""
    if count == 1:
        return x
    dims = list(shape)
    wide = dims[:axis + 1] + [count] + dims[axis + 1:]
    y = g.op("Expand", [g.op("Unsqueeze", [x], axes=(axis + 1,))], shape=wide)
    return reshape_to(g, y, dims[:axis] + [dims[axis] * count] + dims[axis + 1:])


@ts_mapping("repeat_interleave")
def repeat_interleave(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    if len(a) == 2:  # .Tensor(repeats, output_size): the indices, each repeated its count
        counts = _counts(g, a.py(0, what="repeats"), None)
        _check_output_size(g, a, 1, counts)
        return g.constant(np.repeat(np.arange(counts.size, dtype=np.int64), counts))
    x = a.tensor(0)
    dim = a.int(2, None, what="dim")
    if dim is None or not x.shape:  # no dim: torch flattens the input first; a 0-d one as 1-d
        if dim is not None:
            norm_axis(g, dim, 0)
        x = reshape_to(g, x, [-1])
        dim = 0
    shape = static_shape(g, x)
    axis = norm_axis(g, dim, len(shape))
    counts = _counts(g, a.py(1, what="repeats"), shape[axis])
    _check_output_size(g, a, 3, counts)
    # a count of 0 keeps the (empty) Gather: the simulator's compiler cannot lay out an Expand
    # to an empty axis
    if counts.size and counts[0] > 0 and (counts == counts[0]).all():
        return _repeat_each(g, x, shape, axis, int(counts[0]))
    index = np.repeat(np.arange(shape[axis], dtype=np.int64), counts)
    return g.op("Gather", [x, g.constant(index)], axis=axis)
