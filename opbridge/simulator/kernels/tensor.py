"""Kernels of data-movement ops that can stay in local memory.

Concat along channels (axis 1) or along W (axis 3) keeps rows aligned, so it tiles like an
element-wise op. Reshape, Flatten, Squeeze and Unsqueeze only rename the shape of the same
bytes: their output shares the input's DDR bytes and nothing runs (``just_reshape``).
Transpose joins layer groups when it keeps the batch axis first (a transformer's heads split
and merge): output rows [lo, hi) read the same input rows when the rows axis stays in place,
else the slice [lo, hi) of the input axis that becomes the rows (``(axis, lo, hi)``). A layer
group loads that slice of an input it reads from DDR (a strided GDMA, as TPU-MLIR's permute
moves a head split with GDMA), so every input byte is read once whatever the row tiles; an
input computed inside the group is held whole, and the tile kernel transposes it and cuts
the tile's rows. A rank-2/3 Transpose works on the rank-4 view of its tiles
(``memory.view4``). Slice, Gather
and the rest change the layout and run as global layers (no kernel needed: the op's compute
is the global layer).
"""

from __future__ import annotations

import numpy as np

from ...ir.graph import Node
from ..memory import view_axis
from .registry import register_kernel, static_shape


def view_perm(perm: tuple[int, ...]) -> tuple[int, ...]:
    """``perm`` as a permutation of the rank-4 views of its input and output."""
    rank = len(perm)
    if rank >= 4:
        return tuple(perm)
    dims = [view_axis(rank, i) for i in range(rank)]  # output axis i sits at view axis dims[i]
    out = list(range(4))
    for i, p in enumerate(perm):
        out[dims[i]] = view_axis(rank, p)
    return tuple(out)


def transpose_split(node: Node) -> tuple[str, ...] | None:
    """Cut along the output's rows; along its batch items while the batch axis stays first."""
    vp = view_perm(tuple(node.attrs["perm"]))
    if len(static_shape(node.inputs[0])) > 4 or vp[0] != 0:
        return None
    return ("N", "H")


def transpose_rows(node: Node, i: int, lo: int, hi: int) -> tuple[int, ...]:
    """The same rows when the rows axis stays in place, else rows [lo, hi) of the output are
    [lo, hi) of the input axis (of the rank-4 view) that the permutation moves there."""
    src = view_perm(tuple(node.attrs["perm"]))[2]
    return (lo, hi) if src == 2 else (src, lo, hi)


def transpose_tile_attrs(node: Node, lo: int, hi: int, needed, clipped) -> dict:
    """A tile of output rows [lo, hi) from a whole input tile: which rows to keep."""
    attrs = dict(node.attrs)
    if view_perm(tuple(node.attrs["perm"]))[2] != 2:
        attrs["rows"] = (lo, hi)
    return attrs


def transpose_into(out: np.ndarray, x: np.ndarray, *, perm: tuple[int, ...],
                   rows: tuple[int, int] | None = None) -> None:
    """Transpose into ``out``: whole tensors (a global layer) or a tile, which is the rank-4
    view, keeping output rows ``rows`` when the tile holds the whole input (a tile that holds
    just the slice those rows come from transposes into them as it is)."""
    y = x.transpose(perm if x.ndim == len(perm) else view_perm(tuple(perm)))
    if rows is not None and y.shape[2] != out.shape[2]:
        y = y[:, :, rows[0]:rows[1]]
    out[...] = y


def concat_split(node: Node) -> tuple[str, ...]:
    rank = len(node.outputs[0].shape)
    axis = node.attrs["axis"] % max(rank, 1)
    return tuple(a for i, a in ((0, "N"), (2, "H"), (3, "W")) if i != axis)


register_kernel("Concat").split_when(concat_split).cost(lambda n, s: 0.0)
(register_kernel("Transpose").split_when(transpose_split).input_slice(transpose_rows)
 .tile_attrs(transpose_tile_attrs).row_layout().compute_into(transpose_into))

#: Ops whose output is their input's bytes under another shape.
RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")
for _op in RESHAPES:
    register_kernel(_op).global_only().just_reshape()
