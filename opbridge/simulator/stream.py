"""Streaming global layers: one op too big for local memory, run in chunks that fit.

When even the smallest tile of an op does not fit (typically a convolution whose weights
alone exceed a lane), bmcompiler runs it as a global layer that moves data through local
memory itself. Here such an op streams when its kernel can compute its output channels in
chunks (``split`` with ``"C"`` and a ``channel_slice`` hint): for each chunk of output
channels its slice of the weights is loaded once, then the input rows of each row tile
(halo included) are loaded, computed and stored. Chunk size and row tiles are chosen, like
a layer group's tiling, so that everything live fits the lane; an op that cannot stream runs
on whole tensors from DDR.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.graph import Value
from .kernels.registry import static_shape
from .lower import Lowered
from .memory import Buffer, activation_lane_bytes, constant_lane_bytes, packs_4n, plan
from .rows import Rows, clip, row_fn, sliced_shape
from .target import Target


@dataclass
class RowTile:
    """One row tile of a stream: batch items, output rows, and per input (needed, clipped)
    rows (None for inputs taken whole)."""

    n: Rows
    rows: Rows
    needs: list[tuple[Rows, Rows] | None]


@dataclass
class StreamPlan:
    """A global layer that streams: channel chunks x row tiles, with their local buffers."""

    ln: Lowered
    n_per: int
    chunks: list[Rows]
    tiles: list[RowTile]
    alloc: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    lmem_peak: int = 0

    @property
    def nodes(self) -> list[Lowered]:
        return [self.ln]

    @property
    def outputs(self) -> list[Value]:
        return list(self.ln.node.outputs)

    def const_slice(self, i: int, c: Rows) -> tuple[int, int, int] | None:
        """The slice of input ``i`` that output channels ``c`` need."""
        k = self.ln.kernel
        assert k is not None and k.channel_slice_fn is not None
        sl = k.hint("channel_slice", self.ln.node, i, c[0], c[1])
        return None if sl is None else (int(sl[0]), int(sl[1]), int(sl[2]))


def _fit(ln: Lowered, target: Target, n_per: int, n_chunks: int, k: int) -> StreamPlan | None:
    node = ln.node
    out = static_shape(node.outputs[0])
    n, m, h, w = out
    mc = -(-m // n_chunks)
    chunks = [(c0, min(m, c0 + mc)) for c0 in range(0, m, mc)]
    bounds = [round(i * h / k) for i in range(k + 1)]
    tiles: list[RowTile] = []
    fns = {i: row_fn(ln, i, v) for i, v in enumerate(node.inputs)
           if v is not None and not v.is_constant}
    for n0 in range(0, n, n_per):
        for t in range(k):
            lo, hi = bounds[t], bounds[t + 1]
            if hi <= lo:
                continue
            needs: list[tuple[Rows, Rows] | None] = [None] * len(node.inputs)
            for i, fn in fns.items():
                hv = static_shape(node.inputs[i])[2]
                s = fn(lo, hi)
                needs[i] = (s, clip(s, hv))
            tiles.append(RowTile((n0, min(n, n0 + n_per)), (lo, hi), needs))
    plan_ = StreamPlan(ln, n_per, chunks, tiles)
    buffers = []
    first = chunks[0]
    for i, v in enumerate(node.inputs):
        if v is None:
            continue
        shp = static_shape(v)
        sl = plan_.const_slice(i, first)
        if v.is_constant:
            size = constant_lane_bytes(target, sliced_shape(shp, sl), v.dtype)
        else:
            rows = max(tt.needs[i][1][1] - tt.needs[i][1][0] for tt in tiles)  # type: ignore[index]
            c = shp[1] if sl is None or sl[0] != 1 else sl[2] - sl[1]
            n_ext = min(n_per, shp[0]) if shp[0] == n else shp[0]
            size = activation_lane_bytes(target, (n_ext, c, rows, shp[3]), v.dtype)
        buffers.append(Buffer(v.name, size, 0, 0))
    rows_out = max(tt.rows[1] - tt.rows[0] for tt in tiles)
    buffers.append(Buffer(node.outputs[0].name,
                          activation_lane_bytes(target, (n_per, mc, rows_out, w), node.outputs[0].dtype),
                          0, 0))
    k_ = ln.kernel
    if k_ is not None and k_.scratch_fn is not None:
        size = k_.scratch_lane_bytes(node, (n_per, mc, rows_out, w), target.lanes)
        if size > 0:
            buffers.append(Buffer(f"scratch/{node.name}", size, 0, 0))
    if sum(b.size for b in buffers) > target.lmem_bytes_per_lane:
        return None
    peak = plan(buffers, target.lmem_align_bytes)
    if peak > target.lmem_bytes_per_lane:
        return None
    plan_.alloc = {b.key: (b.offset, b.size, b.first, b.last) for b in buffers}
    plan_.lmem_peak = peak
    return plan_


def plan_stream(ln: Lowered, target: Target) -> StreamPlan | None:
    """The streaming plan with the fewest chunk x row tiles that fits, or None."""
    k_ = ln.kernel
    if k_ is None or k_.channel_slice_fn is None or "C" not in ln.axes:
        return None
    n, m, h, _ = static_shape(ln.node.outputs[0])
    n_opts = [n] if "N" not in ln.axes else sorted({n, max(1, n // 2), 1}, reverse=True)
    if any(v is not None and not v.is_constant and packs_4n(target, v.dtype)
           for v in (*ln.node.inputs, *ln.node.outputs)):
        pack = target.int8_batch_pack  # whole 4N groups of batch items
        n_opts = [x for x in n_opts if x == n or x % pack == 0]
    k_max = h if "H" in ln.axes else 1
    best: StreamPlan | None = None
    n_chunks = 1
    while n_chunks <= m:
        for n_per in n_opts:
            k = 1
            while k <= k_max:
                p = _fit(ln, target, n_per, n_chunks, k)
                if p is not None:
                    if best is None or len(p.chunks) * len(p.tiles) < len(best.chunks) * len(best.tiles):
                        best = p
                    break
                k = k * 2 if k * 2 <= k_max or k == k_max else k_max
        if best is not None and len(best.chunks) * len(best.tiles) <= 2 * n_chunks:
            break  # more chunks cannot give fewer tiles
        n_chunks *= 2
    return best
