"""Lowering: every IR node gets a placement (TPU or host CPU) and a kernel.

A node's placement is its own ``placement`` (set when it was created, from the op
definition unless a mapping or the builder said otherwise, and kept in ``.obir``); the
``placement`` callable given to ``compile`` may override it per node. A TPU node runs as a
local layer (may join a layer group) when its kernel has tiling hints and its tensors fit
the NCHW local layout, else as a global layer. A rank-5 node (a 3-D convolution's volumes) is
local when its kernel takes volumes (``Kernel.volumes``), cut along N, its depth D and its
rows H (the group's H and W axes: ``rows.extent``), never in chunks of channels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import SimulatorError
from ..ir.graph import Graph, Node
from ..ir.opdef import PLACEMENTS, check_placement
from .kernels import DEFAULT_KERNELS, Kernel, KernelRegistry
from .memory import view4

TPU, CPU = PLACEMENTS

Placement = Callable[[Node], "str | None"]


def _placement_of(node: Node, placement: Placement | None) -> str:
    """The callable's answer for ``node`` if it gives one, else the node's own placement."""
    where = placement(node) if placement is not None else None
    if where is None:
        return node.placement
    return check_placement(where, f"{node.where}: the placement callable", SimulatorError,
                           hint=f'return "{TPU}", "{CPU}" or None (keep the node\'s own)')


@dataclass
class Lowered:
    """A node with its placement and kernel (None: the op's compute as a global layer)."""

    index: int
    node: Node
    placement: str
    kernel: Kernel | None
    local: bool
    axes: frozenset[str]


def _layout_ok(node: Node) -> bool:
    """Local layers work on rank-4 tiles: one output of rank 4 (NCHW) with rank-4 non-constant
    inputs, or of rank 2 or 3 (a transformer's [batch, tokens, features], seen as the rank-4
    view ``memory.view4``) whose non-constant inputs have its rank, and whose constants
    broadcast against that view as they do against the tensor; or of rank 5 (NCDHW, whose
    tiles keep their rank) with rank-5 non-constant inputs."""
    if len(node.outputs) != 1 or not all(isinstance(d, int) for d in node.outputs[0].shape):
        return False
    rank = len(node.outputs[0].shape)
    if rank not in (2, 3, 4, 5):
        return False
    if any(v is not None and 0 in v.shape for v in (*node.inputs, node.outputs[0])):
        return False  # an empty tensor has no tiles: a global layer, which moves nothing
    n = node.outputs[0].shape[0]
    for v in node.inputs:
        if v is None:
            continue
        if v.is_constant:
            # a rank-3 constant [b, s, f] would line b up with the view's channel axis
            if rank < 4 and (len(v.shape) > rank or (len(v.shape) == 3 and v.shape[0] != 1)):
                return False
            continue
        if len(v.shape) != rank or (rank != 2 and v.shape[0] not in (n, 1)):
            return False
    return True


def _whole_rows_constant(node: Node, k: Kernel | None, axis: str = "H") -> bool:
    """Whether a constant of rank 2 or 3 broadcasts along the output's rows (an (H, W) mask
    added to scores): a tile takes such a constant whole (only a rank-4 one is read at the
    tile's rows), so an op that maps rows one to one must not be cut along H. Along W
    (``axis="W"``) a constant of rank 1 to 3 whose last dimension is the output's width. For a
    volume (rank 5, cut along its depth D as H and its rows H as W) a constant with a depth
    axis (along H) or a rows axis (along W)."""
    if k is None or (k.input_slice_fn if axis == "H" else k.input_slice_w_fn) is not None:
        return False
    if len(node.outputs[0].shape) == 5:
        back = 3 if axis == "H" else 2
        return any(v is not None and v.is_constant and len(v.shape) >= back and v.shape[-back] != 1
                   for v in node.inputs)
    if axis == "W":
        w = view4(node.outputs[0].shape)[3]
        return any(v is not None and v.is_constant and 1 <= len(v.shape) < 4 and v.shape[-1] == w != 1
                   for v in node.inputs)
    h = view4(node.outputs[0].shape)[2]
    return any(v is not None and v.is_constant and 2 <= len(v.shape) < 4 and v.shape[-2] == h != 1
               for v in node.inputs)


def lower(
    graph: Graph,
    *,
    kernels: KernelRegistry | None = None,
    placement: Placement | None = None,
) -> list[Lowered]:
    """Placement and kernel for every node of ``graph``, in the graph's order."""
    reg = kernels if kernels is not None else DEFAULT_KERNELS
    out = []
    for i, node in enumerate(graph.nodes):
        k = reg.get(node.op)
        where = _placement_of(node, placement)
        rank = len(node.outputs[0].shape) if node.outputs else 0
        local = (where == TPU and k is not None and k.local and _layout_ok(node)
                 and (rank == 4 or (rank < 4 and k.rows_ok) or (rank == 5 and k.volumes_ok)))
        split = k.split_axes(node) if local and k is not None else frozenset()
        local = local and split is not None
        axes = split or frozenset()
        if rank == 5:  # a volume's tiles are never chunks of channels
            axes = axes & {"N", "H", "W"}
        if "H" in axes and _whole_rows_constant(node, k):
            axes = axes - {"H"}
        if "W" in axes and _whole_rows_constant(node, k, "W"):
            axes = axes - {"W"}
        if k is not None:
            k.check_dtype(node)
        out.append(Lowered(i, node, where, k, local, axes))
    return out
