"""Kernels of normalisations: tileable along the axes they do not normalise over.

The reductions over the last axis with ``keepdims`` (the mean and variance of a LayerNorm that
torch.onnx spells out op by op) tile the same way: along batch and rows."""

from __future__ import annotations

import math

from ...ir.graph import Node
from ..cost import reduced_axes
from ..memory import view_axis
from .registry import register_kernel, static_shape


def _axes_outside(first_axis: int, rank: int) -> tuple[str, ...]:
    """The N/H/W axes of a rank-4 tensor that lie before ``first_axis`` (normalised axis)."""
    a = first_axis % rank if rank else 0
    names = {0: "N", 2: "H", 3: "W"}
    return tuple(names[i] for i in (0, 2, 3) if i < a)


def _layernorm_split(node: Node) -> tuple[str, ...]:
    """The axes before the first normalised one; for a rank-2/3 input those of its rank-4 view
    (a transformer's LayerNorm over the features tiles along batch and tokens)."""
    if len(node.outputs) != 1:
        return ()
    rank = len(static_shape(node.inputs[0]))
    return _axes_outside(view_axis(rank, node.attrs["axis"]), 4)


def view_axis_attrs(node: Node, lo: int, hi: int, needed, clipped) -> dict:
    """A tile's ``axis``, counted from the end of the rank-4 view the tile is (the same axis
    of a rank-4 tensor; the tail of a rank-2/3 one's view)."""
    attrs = dict(node.attrs)
    rank = len(static_shape(node.inputs[0]))
    if rank < 4:
        attrs["axis"] = view_axis(rank, node.attrs["axis"]) - 4
    return attrs


def _lp_split(node: Node) -> tuple[str, ...]:
    axis = node.attrs["axis"] % max(1, len(static_shape(node.inputs[0])))
    return tuple(a for i, a in ((0, "N"), (2, "H"), (3, "W")) if i != axis)


def _per_element(ops: float):
    def cost(node: Node, out_shape: tuple[int, ...]) -> float:
        n = 1
        for d in out_shape:
            n *= d
        return ops * n

    return cost


#: Reductions that join layer groups when they reduce the last axis only, keeping it.
LAST_AXIS_REDUCTIONS = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceSumSquare",
                        "ReduceL2")


def _last_axis_reduction(node: Node) -> bool:
    rank = len(static_shape(node.inputs[0]))
    return bool(node.attrs["keepdims"]) and rank > 0 and reduced_axes(node) == (rank - 1,)


def _reduce_split(node: Node) -> tuple[str, ...] | None:
    """Batch and rows for a reduction of the last axis; any other runs as a global layer."""
    return ("N", "H") if _last_axis_reduction(node) else None


def _reduce_tile_attrs(node: Node, lo: int, hi: int, needed, clipped) -> dict:
    """The last axis, counted from the end (it is the view's last axis too)."""
    attrs = dict(node.attrs)
    attrs["axes"] = (-1,)
    return attrs


def _reduce_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    """One operation per element read: each output element reads every element of the axes
    it folds (a tile's output reads the whole last axis; a whole-tensor mean reads the whole
    tensor into its one element)."""
    x = static_shape(node.inputs[0])
    return float(math.prod(out_shape) * math.prod(x[a] for a in reduced_axes(node)))


for _op in LAST_AXIS_REDUCTIONS:
    (register_kernel(_op).split_when(_reduce_split).tile_attrs(_reduce_tile_attrs).row_layout()
     .cost(_reduce_cost))
for _op in ("ReduceL1", "ReduceProd", "ReduceLogSum", "ReduceLogSumExp"):  # global layers
    register_kernel(_op).cost(_reduce_cost)
register_kernel("BatchNormalization").split("N", "H", "W").volumes().cost(_per_element(2.0))
register_kernel("LRN").split("N", "H", "W").cost(
    lambda n, s: 2.0 * n.attrs["size"] * float(math.prod(s)))
(register_kernel("LayerNormalization").split_when(_layernorm_split).tile_attrs(view_axis_attrs)
 .row_layout().cost(_per_element(8.0)))
register_kernel("InstanceNormalization").split("N").cost(_per_element(8.0))
register_kernel("GroupNormalization").split("N").cost(_per_element(8.0))
register_kernel("LpNormalization").split_when(_lp_split).cost(_per_element(3.0))
