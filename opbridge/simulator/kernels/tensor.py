"""Kernels of data-movement ops that can stay in local memory.

Concat along channels (axis 1) or along W (axis 3) keeps rows aligned, so it tiles like an
element-wise op. Reshape, Flatten, Squeeze and Unsqueeze only rename the shape of the same
bytes: their output shares the input's DDR bytes and nothing runs (``just_reshape``).
Transpose, Slice, Gather and the rest change the layout and run as global layers (no kernel
needed: the op's compute is the global layer).
"""

from __future__ import annotations

from ...ir.graph import Node
from .registry import register_kernel


def concat_split(node: Node) -> tuple[str, ...]:
    rank = len(node.outputs[0].shape)
    axis = node.attrs["axis"] % max(rank, 1)
    return tuple(a for i, a in ((0, "N"), (2, "H"), (3, "W")) if i != axis)


register_kernel("Concat").split_when(concat_split).cost(lambda n, s: 0.0)

#: Ops whose output is their input's bytes under another shape.
RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")
for _op in RESHAPES:
    register_kernel(_op).global_only().just_reshape()
