"""Memory layouts and allocators: per-lane local-memory footprints, and lifetime-based plans.

Local memory (DESIGN.md, "The simulated target"): a tensor is spread over the lanes by
channel (channel ``c`` on lane ``c mod lanes``), each lane holding its channels' H*W planes
aligned to the EU width, so a tile of shape (N, C, H, W) takes
``N * ceil(C / lanes) * align(H * W, EU) * itemsize`` bytes in *every* lane. A constant
(weights) is spread by its first axis: ``ceil(d0 / lanes) * align(d1 * d2 * ..., EU) * itemsize``
bytes per lane; a constant of shape (1, C, H, W) (a broadcast operand) uses the activation
layout.

A tensor of rank 1 to 3 (the activations of a transformer: [batch, tokens, features]) has the
*row* layout instead, as TPU-MLIR lays out the operands of its local MatMul (sophgo/tpu-mlir,
``lib/Dialect/Tpu/Interfaces/BM1684X/MatMul.cpp``, ``getBufferSize_bm1684x``: a matrix is
arranged as ``{1, rows, 1, K}``, ``ceiling_func(rows, NPU_NUM) * align_up(K, eu_num)`` elements
per lane): its rows (the leading dimensions flattened) go over the lanes, its last dimension
(the features) along the EU, so a tile of R rows and F features takes
``ceil(R / lanes) * align(F, EU) * itemsize`` bytes per lane. Inside a layer group such a tensor
is seen through the rank-4 view :func:`view4` (batch, 1, tokens, features), so the tiling code
cuts its tokens as it cuts an image's rows.

On a target whose ``int8_batch_pack`` is 4 (the BM1684), an 8-bit integer activation is held
in the chip's 4N layout: four batch items share one 32-bit element, so a tile of N items takes
``ceil(N / 4) * ceil(C / lanes) * align(H * W, EU of 4 bytes) * 4`` bytes per lane, and GDMA
moves ``ceil(N / 4) * 4 * C * H * W`` bytes of it: at batch 1 as many as f32, at batch 4 a
quarter per image (a pack of P items in general: P-byte elements). TPU-MLIR sizes BM1684 tensors this way: ``Arch::get_tensor_lmem_bytes``
and ``Arch::get_gmem_bytes`` under ``ALIGN_4N`` (``lib/Backend/Arch.cpp``), which the BM1684
constructor sets (``include/tpu_mlir/Backend/BM168x/BM1684.h``; sophgo/tpu-mlir at commit
015442ac4a6528730d57e9cdc36a7c6d85d76b3f). Weights keep their plain size (TPU-MLIR's
``get_weight_lmem_bytes`` and the weight case of ``get_gmem_bytes``).

A rank-5 tensor (N, C, D, H, W), the activations of a 3-D convolution, keeps the channel-over-
lanes layout with each lane holding its channels' D x H x W volumes: a layer group sees it
through the rank-4 view (N, C, D, H*W), so it cuts the depth as an image's rows (with the
halo of a 3-D window) and the rows H as columns of whole W-element rows, and a tile of d depth
slices and h rows takes ``N * ceil(C / lanes) * align(d * h * W, EU) * itemsize`` bytes per
lane; its kernels still get the rank-5 tile. TPU-MLIR's BM1684X Conv3D local layer likewise
holds whole rows of W in a tile (``lib/Dialect/Tpu/Interfaces/BM1684X/Conv3D.cpp``,
``conv3d_local_spec_t``: input ``(id, n, ic, h_slice, iw)``); it aligns each depth slice's
rows on their own, where this layout aligns a tile's d * h * W elements once.

Both local memory and DDR are planned the same way: every buffer has a size and a lifetime
(first and last step that uses it), and buffers whose lifetimes overlap never share bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .target import Target, itemsize


def align(x: int, a: int) -> int:
    return -(-x // a) * a


#: Activation dtypes the 4N layout packs four batch items of into one 32-bit element.
PACKED_4N = ("i8", "u8")


def packs_4n(target: Target, dtype: str) -> bool:
    """Whether ``target`` holds activations of ``dtype`` in the 4N layout (see the module doc):
    8-bit integers on a chip that packs several batch items (``int8_batch_pack``)."""
    return target.int8_batch_pack > 1 and dtype in PACKED_4N


def activation_lane_bytes(target: Target, shape: Sequence[int], dtype: str,
                          packed: bool = True) -> int:
    """Per-lane bytes of a rank-4 (N, C, H, W) tile in the channel-over-lanes layout (a rank-5
    one through its view :func:`view4`; ``packed=False``: never in the 4N layout, as a weight)."""
    n, c, h, w = view4(shape)
    if packed and packs_4n(target, dtype):
        p = target.int8_batch_pack
        return -(-n // p) * -(-c // target.lanes) * align(h * w, max(1, target.eu_bytes // p)) * p
    eu = target.eu_elems(dtype)
    return n * -(-c // target.lanes) * align(h * w, eu) * itemsize(dtype)


def view4(shape: Sequence[int]) -> tuple[int, ...]:
    """The rank-4 view a layer group uses for a tensor: itself at rank 4, (batch, 1, tokens,
    features) at rank 3, (1, 1, rows, features) at rank 2, (1, 1, 1, features) at rank 1, and
    (N, C, D, H * W) at rank 5 (a volume: its depth slices are the view's rows)."""
    rank = len(shape)
    if rank == 5:
        n, c, d, h, w = shape
        return (n, c, d, h * w)
    if rank >= 4:
        return tuple(shape)
    if rank == 3:
        return (shape[0], 1, shape[1], shape[2])
    return (1,) * (4 - rank) + tuple(shape)


def view_axis(rank: int, axis: int) -> int:
    """The axis of the rank-4 view (:func:`view4`) that axis ``axis`` of a rank-``rank``
    tensor becomes (negative axes count from the end)."""
    a = axis % max(rank, 1)
    if rank == 5:
        return (0, 1, 2, 3, 3)[a]
    if rank >= 4:
        return a
    if rank == 3:
        return (0, 2, 3)[a]
    return 4 - rank + a


def row_lane_bytes(target: Target, shape: Sequence[int], dtype: str) -> int:
    """Per-lane bytes of a tile of a rank-1-to-3 tensor in the row layout: the rows of its
    rank-4 view (batch x tokens) over the lanes, the features along the EU."""
    n, c, h, w = shape
    return -(-(n * c * h) // target.lanes) * align(w, target.eu_elems(dtype)) * itemsize(dtype)


def tile_lane_bytes(target: Target, shape: Sequence[int], dtype: str, rows: bool) -> int:
    """Per-lane bytes of a tile (rank-4 view ``shape``): the row layout when ``rows`` (the
    tensor has rank 1 to 3), else the channel-over-lanes layout."""
    return row_lane_bytes(target, shape, dtype) if rows else activation_lane_bytes(target, shape, dtype)


def gdma_bytes(target: Target, shape: Sequence[int], dtype: str) -> int:
    """Bytes a GDMA transfer of an activation slice of ``shape`` moves (batch axis first):
    its elements, but in the 4N layout whole groups of four batch items."""
    shape = tuple(shape)
    if shape and packs_4n(target, dtype):
        p = target.int8_batch_pack
        return -(-shape[0] // p) * p * math.prod(shape[1:])
    return math.prod(shape) * itemsize(dtype)


def constant_lane_bytes(target: Target, shape: Sequence[int], dtype: str) -> int:
    """Per-lane bytes of a constant held whole in local memory."""
    shape = tuple(shape)
    if len(shape) == 4 and shape[0] == 1:
        return activation_lane_bytes(target, shape, dtype, packed=False)
    if not shape:
        shape = (1,)
    rest = math.prod(shape[1:])
    return -(-shape[0] // target.lanes) * align(rest, target.eu_elems(dtype)) * itemsize(dtype)


@dataclass
class Buffer:
    """One allocation request: a key, a size, and the steps ``[first, last]`` it is live."""

    key: str
    size: int
    first: int
    last: int
    offset: int = -1


def plan(buffers: list[Buffer], alignment: int) -> int:
    """Give every buffer an offset so that buffers live at the same step never overlap.

    Greedy by size (largest first), each at the lowest aligned offset that is free for its
    whole lifetime; returns the peak (the end of the highest buffer).
    """
    placed: list[tuple[int, int, int, int]] = []  # (first, last, offset, end) of each placed
    peak = 0
    for b in sorted(buffers, key=lambda b: (-b.size, b.first, b.key)):
        size = align(max(b.size, 1), alignment)
        first, last = b.first, b.last
        clashes = sorted([(lo, hi) for f, t, lo, hi in placed if f <= last and first <= t])
        off = 0
        for lo, hi in clashes:
            if off + size <= lo:
                break
            if hi > off:
                off = hi
        b.offset = off
        placed.append((first, last, off, off + size))
        peak = max(peak, off + size)
    return peak
