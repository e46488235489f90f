"""Layer groups: runs of local layers tiled on N, H and W so that every live tile fits local memory.

For a candidate group and a tiling (``n_per`` batch items, ``k`` row tiles, ``kw`` column
tiles) the compiler
slices *backwards* from the group's outputs, as bmcompiler's backward slice functions do:
each stored output asks for its next rows, each node computes the hull of the rows its
consumers need, and its kernel says which input rows that takes (the halo of a window).
Every tensor's largest tile then gets a per-lane footprint (``memory.activation_lane_bytes``)
and a local address from a lifetime-based allocator; the tiling fits when the allocator's
peak is within the lane's local memory. ``partition.py`` grows a group node by node while
a tiling fits and the recomputed halo rows stay under :data:`MAX_REDUNDANCY`, and decides
what becomes of a node that fits no tiling on its own.

A group input that one node reads along another axis than its rows (a Transpose that moves
the tokens of a head split to the channels, ``input_slice`` answering ``(axis, lo, hi)``) is
cut along that axis instead (``GroupPlan.cut_axis``): each tile loads its own slice, so the
group reads the tensor once whatever its row tiles.

Rows and columns are sliced independently (an ``input_slice`` along H depends on rows only,
along W on columns only, as bmcompiler's ``backward_hslice`` and ``backward_wslice``), so a
tile is a row tile crossed with a column tile. Columns are cut only when every node may be
cut along W and no row tiling fits (a tensor of one huge row): ``kw = 1`` otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import SimulatorError
from ..ir.graph import Value
from .kernels.registry import static_shape
from .lower import Lowered
from .memory import Buffer, constant_lane_bytes, packs_4n, plan, tile_lane_bytes
from .rows import Rows, clip, col_elems, extent, gshape, row_fn, row_layout, slice_axis, sliced_shape
from .target import Target

#: Largest ratio of computed to needed elements (halo rows recomputed by several tiles).
MAX_REDUNDANCY = 1.15
#: Largest number of nodes in one group (bounds compile time).
MAX_GROUP_NODES = 48
#: A streamed weight is cut into chunks of output features of at most this share of a lane
#: (each chunk is loaded again for every row tile: what streaming costs in GDMA).
STREAM_SHARE = 8


Needs = dict[str, list[tuple[Rows, Rows] | None]]


@dataclass
class AxisTile:
    """One cut along H (or W): per tensor the rows held, per node the rows computed and per
    input the (needed, clipped) rows, per stored output the rows stored."""

    held: dict[str, Rows]
    computed: dict[str, Rows]
    needs: Needs
    stores: dict[str, Rows]


@dataclass
class Tile:
    """One tile: its batch range, the rows of every tensor it holds, what it stores; the
    ``*_w`` twins say the same of columns (empty when the group is not cut along W: every
    tensor then has whole rows)."""

    n: Rows
    rows: dict[str, Rows]
    computed: dict[str, Rows]                       # node name -> output rows computed
    needs: Needs                                    # node -> per input (needed, clipped)
    stores: dict[str, Rows]                         # output tensor -> rows stored
    cols: dict[str, Rows] = field(default_factory=dict)
    computed_w: dict[str, Rows] = field(default_factory=dict)
    needs_w: Needs = field(default_factory=dict)
    stores_w: dict[str, Rows] = field(default_factory=dict)


@dataclass
class GroupPlan:
    """A layer group: its nodes, its tiles and its local-memory allocation."""

    nodes: list[Lowered]
    inputs: list[Value]
    consts: list[Value]
    outputs: list[Value]
    n_per: int
    k: int
    tiles: list[Tile]
    #: buffer key -> (per-lane address, per-lane bytes, first node index, last node index)
    alloc: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    lmem_peak: int = 0
    redundancy: float = 1.0
    #: loaded inputs and stored outputs have two buffers (``name`` and ``name#1``), used by
    #: even and odd tiles, so the next tile's loads overlap this tile's computes
    double: bool = False
    #: column cuts per tile
    kw: int = 1
    #: tensor -> the tensor whose buffer it shares (in-place layers), and the bytes saved
    aliases: dict[str, str] = field(default_factory=dict)
    lmem_saved: int = 0
    #: node -> the chunks of output features it computes one after the other, each after
    #: loading its slice of the node's streamed weights (:data:`STREAM_SHARE`)
    streams: dict[str, list[Rows]] = field(default_factory=dict)
    #: group input -> the axis of its rank-4 view its tiles' ``rows`` run along (C = 1 or
    #: W = 3), for an input cut along another axis than H (see the module doc)
    cut_axis: dict[str, int] = field(default_factory=dict)

    def tile_dims(self, v: Value, n: int, rows: int, cols: int) -> tuple[int, ...]:
        """The rank-4 shape of a tile of ``v``: ``n`` items, ``rows`` along its cut axis."""
        return tile_dims(gshape(v), self.cut_axis.get(v.name, 2), n, rows, cols)

    def streamed(self, node: str, i: int, parity: int = 0) -> str:
        """The local buffer that holds the chunks of input ``i`` of a streamed node: two of
        them, even and odd chunks, so a chunk loads while the one before it computes."""
        return stream_buffer(node, i, parity)

    @property
    def node_names(self) -> list[str]:
        return [ln.node.name for ln in self.nodes]


def tile_dims(shape: tuple[int, ...], axis: int, n: int, rows: int, cols: int) -> tuple[int, ...]:
    """A tile of a tensor of rank-4 view ``shape``: ``n`` items, ``rows`` along ``axis`` (H,
    or C / W for a cut-axis input, whose H is then whole), ``cols`` columns when cut on H."""
    if axis == 2:
        return (n, shape[1], rows, cols)
    dims = [n, *shape[1:]]
    dims[axis] = rows
    return tuple(dims)


def stream_buffer(node: str, i: int, parity: int = 0) -> str:
    """The local buffer of the even (``parity`` 0) or odd chunks of input ``i`` of a streamed
    node."""
    return f"stream/{node}/{i}" + ("/odd" if parity % 2 else "")


def _merge(a: Rows | None, b: Rows) -> Rows:
    """The hull of two row ranges, where an empty range adds no row."""
    if a is None or a[0] >= a[1]:
        return b if a is None or b[0] < b[1] else a
    return a if b[0] >= b[1] else (min(a[0], b[0]), max(a[1], b[1]))


class GroupCandidate:
    """The static structure of a candidate group, shared by every tiling tried on it."""

    def __init__(self, nodes: list[Lowered], graph_outputs: set[str]) -> None:
        self.nodes = nodes
        names = {ln.node.name for ln in nodes}
        produced: dict[str, int] = {}
        for j, ln in enumerate(nodes):
            produced[ln.node.outputs[0].name] = j
        self.inputs: list[Value] = []
        self.consts: list[Value] = []
        seen: set[str] = set()
        self.first_use: dict[str, int] = {}
        self.last_use: dict[str, int] = {}
        for j, ln in enumerate(nodes):
            for v in ln.node.inputs:
                if v is None:
                    continue
                self.last_use[v.name] = j
                self.first_use.setdefault(v.name, j)
                if v.name in seen or v.name in produced:
                    continue
                seen.add(v.name)
                (self.consts if v.is_constant else self.inputs).append(v)
        self.outputs: list[Value] = []
        for ln in nodes:
            v = ln.node.outputs[0]
            if v.name in graph_outputs or any(u.name not in names for u in v.users):
                self.outputs.append(v)
        self.produced = produced
        self.stored = {v.name for v in self.outputs}
        self.n = gshape(nodes[0].node.outputs[0])[0]
        self.anchor = nodes[-1].node.outputs[0]
        self.can_split_n = all("N" in ln.axes for ln in nodes)
        self.can_split_w = all("W" in ln.axes for ln in nodes)
        self.cut_axis = self._cut_axes()
        # per axis, per node in reverse order: what backward slicing needs, computed once
        self._rev: dict[str, list] = {"H": self._reverse("H")}
        self._cuts: dict[tuple[str, int], list[AxisTile]] = {}
        self._stream_nodes: list[tuple[int, Lowered, list[int]]] | None = None
        self._values = {v.name: v for v in self.inputs}
        for ln in nodes:
            self._values[ln.node.outputs[0].name] = ln.node.outputs[0]
        self._full_cols = {name: extent(v, "W") for name, v in self._values.items()}

    def _cut_axes(self) -> dict[str, int]:
        """The group inputs cut along C or W: read by one node of the group, whose kernel
        says its rows come from that axis, in a group not cut along W."""
        if self.can_split_w:
            return {}
        readers: dict[str, list[tuple[Lowered, int]]] = {}
        for ln in self.nodes:
            for i, v in enumerate(ln.node.inputs):
                if v is not None and not v.is_constant:
                    readers.setdefault(v.name, []).append((ln, i))
        out = {}
        for v in self.inputs:
            (only, *more) = readers[v.name]
            if not more and "H" in only[0].axes:
                a = slice_axis(*only)
                if a in (1, 3):
                    out[v.name] = a
        return out

    def _reverse(self, axis: str) -> list:
        rev = []
        for ln in reversed(self.nodes):
            node = ln.node
            out = node.outputs[0]
            ins = []
            for i, v in enumerate(node.inputs):
                if v is None or v.is_constant:
                    continue
                along = self.cut_axis.get(v.name) if axis == "H" else None
                size = extent(v, axis) if along is None else gshape(v)[along]
                ins.append((i, v.name, size, row_fn(ln, i, v, axis, along)))
            rev.append((node.name, out.name, extent(out, axis), axis in ln.axes, ins,
                        len(node.inputs)))
        return rev

    def axis_tiles(self, axis: str, k: int) -> list[AxisTile]:
        """Backward slicing of ``k`` cuts along ``axis`` (H or W), from the group's outputs."""
        key = (axis, k)
        if key in self._cuts:
            return self._cuts[key]
        if axis not in self._rev:
            self._rev[axis] = self._reverse(axis)
        rev = self._rev[axis]
        href = extent(self.anchor, axis)
        bounds = [round(i * href / k) for i in range(k + 1)]
        upto = {v.name: 0 for v in self.outputs}
        cuts = []
        for t in range(k):
            last = t == k - 1
            req: dict[str, Rows] = {}
            for v in self.outputs:
                h = extent(v, axis)
                hi = h if last else -(-bounds[t + 1] * h // href)
                lo = upto[v.name]
                req[v.name] = (lo, max(lo, hi))
            computed: dict[str, Rows] = {}
            needs: Needs = {}
            for name, out_name, out_h, split_h, ins, n_in in rev:
                r = req.get(out_name)
                if r is None or r[0] >= r[1]:
                    continue
                if not split_h:
                    r = (0, out_h)
                    req[out_name] = r
                computed[name] = r
                nd: list[tuple[Rows, Rows] | None] = [None] * n_in
                for i, vname, hv, row_of in ins:
                    s = row_of(r[0], r[1])
                    c = clip(s, hv)
                    nd[i] = (s, c)
                    req[vname] = _merge(req.get(vname), c)
                needs[name] = nd
            stores = {}
            for v in self.outputs:
                r = req[v.name]
                if r[1] > upto[v.name]:
                    stores[v.name] = (upto[v.name], r[1])
                    upto[v.name] = r[1]
            # a slice may be empty (a convolution's rows that read only padding): the
            # tile then holds no row of that tensor
            held = {name: r for name, r in req.items() if r[1] >= r[0]}
            cuts.append(AxisTile(held, computed, needs, stores))
        for v in self.outputs:
            if upto[v.name] != extent(v, axis):
                raise SimulatorError(
                    f"layer group ending at {self.nodes[-1].node.where}: tiling stores "
                    f"{'rows' if axis == 'H' else 'columns'} [0, {upto[v.name]}) of '{v.name}', "
                    f"not all {extent(v, axis)}",
                    hint=f"a kernel's input_slice (axis {axis}) is inconsistent with its op",
                )
        self._cuts[key] = cuts
        return cuts

    def slice(self, n_per: int, k: int, kw: int = 1) -> list[Tile]:
        """Every tile of the tiling (n_per, k, kw): row cuts crossed with column cuts."""
        hs = self.axis_tiles("H", k)
        tiles = []
        if kw == 1:  # whole rows: nothing to slice along W
            for n0 in range(0, self.n, n_per):
                n1 = min(self.n, n0 + n_per)
                tiles += [Tile((n0, n1), th.held, th.computed, th.needs, th.stores) for th in hs]
            return tiles
        ws = self.axis_tiles("W", kw)
        for n0 in range(0, self.n, n_per):
            n1 = min(self.n, n0 + n_per)
            for th in hs:
                for tw in ws:
                    computed = {nm: r for nm, r in th.computed.items() if nm in tw.computed}
                    stores = {v: r for v, r in th.stores.items() if v in tw.stores}
                    tiles.append(Tile((n0, n1), th.held, computed, th.needs, stores, tw.held,
                                      tw.computed, tw.needs,
                                      {v: r for v, r in tw.stores.items() if v in stores}))
        return tiles

    def fit(self, target: Target, n_per: int, k: int, double: bool = False,
            kw: int = 1) -> GroupPlan | None:
        """The tiling (n_per, k, kw) with its local-memory allocation, or None if it does not fit.

        ``double``: give every loaded input and stored output two buffers (ping-pong), live
        for the whole group."""
        tiles = self.slice(n_per, k, kw)
        max_rows: dict[str, int] = {}
        max_cols: dict[str, int] = {}
        for t in tiles:
            for ext, held in ((max_rows, t.rows), (max_cols, t.cols)):
                for name, (lo, hi) in held.items():
                    if hi - lo >= ext.get(name, 0):
                        ext[name] = hi - lo
        if kw == 1:  # a tile then holds whole rows, whatever columns its consumers read
            max_cols = self._full_cols
        for streams in self._stream_options(target):
            # streamed chunks double-buffered when that fits, else through one buffer
            for two in ((True, False) if streams else (False,)):
                p = self._place(target, n_per, k, kw, tiles, max_rows, max_cols, double, streams, two)
                if p is not None:
                    return p
        return None

    def _place(self, target: Target, n_per: int, k: int, kw: int, tiles: list[Tile],
               max_rows: dict[str, int], max_cols: dict[str, int], double: bool,
               streams: dict[str, list[Rows]], two: bool = False) -> GroupPlan | None:
        """The local allocation of a tiling with the weights of ``streams`` streamed (``two``:
        through two chunk buffers), or None."""
        buffers, aliases, saved = self._buffers(target, n_per, max_rows, max_cols, double, streams, two)
        budget = target.lmem_bytes_per_lane
        last = len(self.nodes) - 1
        if sum(b.size for b in buffers if b.first == 0 and b.last == last) > budget:
            return None
        peak = plan(buffers, target.lmem_align_bytes)
        if peak > budget:
            return None
        alloc = {b.key: (b.offset, b.size, b.first, b.last) for b in buffers}
        for name, base in aliases.items():
            alloc[name] = alloc[base]
        gone = self._streamed_consts(streams)
        consts = [c for c in self.consts if c.name not in gone]
        return GroupPlan(self.nodes, self.inputs, consts, self.outputs, n_per, k, tiles,
                         alloc, peak, self._redundancy(tiles), double, kw, aliases, saved,
                         dict(streams), self.cut_axis)

    def _streamable(self) -> list[tuple[int, Lowered, list[int]]]:
        """The nodes whose constant weights may stream (their kernel slices them by output
        feature), largest weights first: (elements of the weights, node, weight inputs)."""
        if self._stream_nodes is None:
            out = []
            for ln in self.nodes:
                k = ln.kernel
                if k is None or k.feature_slice_fn is None or not row_layout(ln.node.outputs[0]):
                    continue
                f = gshape(ln.node.outputs[0])[3]
                ins = [i for i, v in enumerate(ln.node.inputs) if v is not None and v.is_constant
                       and k.hint("feature_slice", ln.node, i, 0, f) is not None]
                size = sum(math.prod(static_shape(ln.node.inputs[i])) for i in ins)
                if ins:
                    out.append((size, ln, ins))
            self._stream_nodes = sorted(out, key=lambda t: -t[0])
        return self._stream_nodes

    def _stream_options(self, target: Target) -> Iterator[dict[str, list[Rows]]]:
        """Which weights stream, in the order tried: none; then the largest, the two
        largest, ... each cut into chunks of output features of at most 1/STREAM_SHARE of a lane."""
        yield {}
        nodes = self._streamable()
        streams: dict[str, list[Rows]] = {}
        eu = target.eu_elems(self.nodes[0].node.outputs[0].dtype)
        for _, ln, ins in nodes:
            node = ln.node
            f = gshape(node.outputs[0])[3]
            whole = sum(constant_lane_bytes(target, static_shape(node.inputs[i]), node.inputs[i].dtype)
                        for i in ins)
            n_chunks = max(2, -(-whole * STREAM_SHARE // target.lmem_bytes_per_lane))
            per = -(-f // n_chunks)
            width = min(f, -(-per // eu) * eu)
            streams[node.name] = [(c0, min(f, c0 + width)) for c0 in range(0, f, width)]
            yield dict(streams)

    def _streamed_consts(self, streams: dict[str, list[Rows]]) -> set[str]:
        """The constants no node of the group holds whole (every reader streams them)."""
        if not streams:
            return set()
        held: set[str] = set()
        chunked: set[str] = set()
        for ln in self.nodes:
            ins = dict((i, v) for i, v in enumerate(ln.node.inputs) if v is not None and v.is_constant)
            streamed = {i for _, s_ln, s_ins in self._streamable() if s_ln is ln for i in s_ins} \
                if ln.node.name in streams else set()
            for i, v in ins.items():
                (chunked if i in streamed else held).add(v.name)
        return chunked - held

    def _buffers(self, target: Target, n_per: int, max_rows: dict[str, int],
                 max_cols: dict[str, int], double: bool, streams: dict[str, list[Rows]],
                 two: bool = False) -> tuple[list[Buffer], dict[str, str], int]:
        """The local buffers of a tiling (constants, tiles, ping-pong pairs, scratch), the
        in-place outputs that share their input's buffer, and the per-lane bytes that saves."""
        values = self._values
        last = len(self.nodes) - 1
        aliases = self._aliases(max_rows, max_cols, double)
        buffers: list[Buffer] = self._stream_buffers(target, streams, two)
        gone = self._streamed_consts(streams)
        for c in self.consts:
            if c.name in gone:
                continue
            buffers.append(Buffer(c.name, constant_lane_bytes(target, static_shape(c), c.dtype), 0, last))
        sizes: dict[str, int] = {}
        spans: dict[str, tuple[int, int]] = {}
        for name, rows in max_rows.items():
            v = values[name]
            shp = gshape(v)
            n_ext = (min(n_per, self.n) if shp[0] == self.n else 1)
            dims = tile_dims(shp, self.cut_axis.get(name, 2), n_ext, rows,
                             max_cols.get(name, 0) * col_elems(v))
            sizes[name] = tile_lane_bytes(target, dims, v.dtype, row_layout(v))
            if name in self.produced:
                first = self.produced[name]
                spans[name] = (first, max(first, self.last_use.get(name, first)))
            else:
                spans[name] = (self.first_use[name], self.last_use[name])
        for out, base in aliases.items():  # the shared buffer lives as long as either tensor
            spans[base] = (min(spans[base][0], spans[out][0]), max(spans[base][1], spans[out][1]))
        for name, size in sizes.items():
            if name in aliases:
                continue
            first, lastu = spans[name]
            if double and (name not in self.produced or name in self.stored):
                buffers.append(Buffer(name, size, 0, last))
                buffers.append(Buffer(name + "#1", size, 0, last))
            else:
                buffers.append(Buffer(name, size, first, lastu))
        for j, ln in enumerate(self.nodes):
            if ln.kernel is not None and ln.kernel.scratch_fn is not None:
                out = ln.node.outputs[0]
                shape = (n_per, gshape(out)[1], max_rows.get(out.name, 0),
                         max_cols.get(out.name, 0))
                size = ln.kernel.scratch_lane_bytes(ln.node, shape, target.lanes)
                if size > 0:
                    buffers.append(Buffer(f"scratch/{ln.node.name}", size, j, j))
        return buffers, aliases, sum(sizes[o] for o in aliases)

    def _stream_buffers(self, target: Target, streams: dict[str, list[Rows]], two: bool
                        ) -> list[Buffer]:
        """One buffer per streamed weight input, for its widest chunk, live at its node; with
        ``two`` a second one (even and odd chunks), so the next chunk's load overlaps this
        chunk's compute, as a layer group's ping-pong buffers overlap its tiles."""
        out = []
        for j, ln in enumerate(self.nodes):
            chunks = streams.get(ln.node.name)
            if not chunks:
                continue
            k = ln.kernel
            assert k is not None
            c0, c1 = max(chunks, key=lambda c: c[1] - c[0])
            for _, s_ln, ins in self._streamable():
                if s_ln is not ln:
                    continue
                for i in ins:
                    v = ln.node.inputs[i]
                    assert v is not None
                    shp = sliced_shape(static_shape(v), k.hint("feature_slice", ln.node, i, c0, c1))
                    size = constant_lane_bytes(target, shp, v.dtype)
                    out += [Buffer(stream_buffer(ln.node.name, i, p), size, j, j)
                            for p in ((0, 1) if two else (0,))]
        return out

    def _aliases(self, max_rows: dict[str, int], max_cols: dict[str, int], double: bool
                 ) -> dict[str, str]:
        """In-place layers whose output may take input 0's buffer: same shape and dtype, the
        input produced in the group, read by this node only and not stored, neither tensor
        in a ping-pong pair, and the same tile extent in every tile."""
        aliases: dict[str, str] = {}
        for ln in self.nodes:
            if ln.kernel is None or not ln.kernel.in_place or not ln.node.inputs:
                continue
            x, y = ln.node.inputs[0], ln.node.outputs[0]
            if (ln.kernel.input_slice_fn is not None or ln.kernel.input_slice_w_fn is not None
                    or x is None or x.is_constant or x.name not in self.produced or x.name in self.stored
                    or len(x.users) != 1 or x.dtype != y.dtype or static_shape(x) != static_shape(y)
                    or (double and y.name in self.stored) or x.name not in max_rows
                    or (max_rows[x.name], max_cols.get(x.name)) != (max_rows.get(y.name),
                                                                   max_cols.get(y.name))):
                continue
            aliases[y.name] = aliases.get(x.name, x.name)
        return aliases

    def _redundancy(self, tiles: list[Tile]) -> float:
        """Computed over needed elements (halo rows and columns recomputed by several tiles)."""
        done = needed = 0.0
        for ln in self.nodes:
            out = ln.node.outputs[0]
            shp = gshape(out)
            per_row = math.prod(shp) / shp[2] / shp[0]
            needed += math.prod(shp)
            wv = extent(out, "W")
            for t in tiles:
                cr = t.computed.get(ln.node.name)
                if cr is not None:
                    cw = t.computed_w.get(ln.node.name, (0, wv))
                    done += (cr[1] - cr[0]) * per_row * (t.n[1] - t.n[0]) * ((cw[1] - cw[0]) / wv)
        return done / max(needed, 1.0)

    def best(self, target: Target, start: tuple[int, ...] | None = None,
             double: bool = False) -> GroupPlan | None:
        """The tiling with the fewest tiles that fits (``start``: try that tiling (n_per, k,
        kw) first); ``double``: then ping-pong buffers for its loads and stores, if they fit too."""
        p = self._best(target, start)
        if double and p is not None and len(p.tiles) > 1:
            # pipelining is worth a few more tiles, not many: about twice as many row cuts
            # (column cuts, for a group cut along W)
            if p.kw > 1:
                d = self._double_kw(target, p)
            else:
                d = self._min_k(target, p.n_per, gshape(self.anchor)[2], double=True)
            if d is not None and d.k <= 2 * p.k + 2 and d.redundancy <= max(p.redundancy, MAX_REDUNDANCY):
                return d
        return p

    def _double_kw(self, target: Target, p: GroupPlan) -> GroupPlan | None:
        """The fewest column cuts, up to about twice ``p``'s, with which ``p``'s row tiling
        fits with ping-pong buffers (bisecting: the footprint shrinks as the cuts grow)."""
        lo, hi = p.kw - 1, min(2 * p.kw + 2, extent(self.anchor, "W"))
        found = self.fit(target, p.n_per, p.k, True, hi)
        if found is None:
            return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            q = self.fit(target, p.n_per, p.k, True, mid)
            if q is not None:
                found, hi = q, mid
            else:
                lo = mid
        return found

    def n_options(self, target: Target) -> list[int]:
        """Batch items per tile to try, most first: all, then halves while the group may be
        cut along N. A group holding a tensor in the 4N layout takes whole groups of
        ``int8_batch_pack`` items (a tile of items [3, 5) would split two 32-bit elements)."""
        if not self.can_split_n:
            return [self.n]
        quads = any(packs_4n(target, v.dtype) for v in self._values.values())
        unit = target.int8_batch_pack if quads else 1
        m = -(-self.n // unit)
        out = [self.n]
        while m > 1:
            m = -(-m // 2)
            out.append(min(self.n, m * unit))
        return list(dict.fromkeys(out))

    def _best(self, target: Target, start: tuple[int, ...] | None) -> GroupPlan | None:
        n_options = self.n_options(target)
        if start is not None and start[0] in n_options:
            n_per, k, kw = (*start, 1)[:3]
            if kw == 1 or self.can_split_w:
                p = self.fit(target, n_per, k, kw=kw)
                if p is not None:
                    return p
                # a grown group rarely needs fewer cuts: search upwards from the last tiling
                p = self._min_k(target, n_per, gshape(self.anchor)[2], k_from=k, kw=kw)
                if p is not None:
                    return p
        href = gshape(self.anchor)[2]
        best: GroupPlan | None = None
        for n_per in n_options:
            p = self._min_k(target, n_per, href)
            if p is not None and (best is None or len(p.tiles) < len(best.tiles)):
                best = p
            if best is not None and best.k == 1:
                break
        if best is None and self.can_split_w:
            best = self._min_kw(target, n_options[-1], href)
        return best

    def _min_kw(self, target: Target, n_per: int, href: int) -> GroupPlan | None:
        """No row tiling fits: the fewest column cuts (each with the fewest row cuts) that
        fit, by doubling then bisecting."""
        wref = extent(self.anchor, "W")
        lo, hi = 1, 2
        found: GroupPlan | None = None
        while True:
            hi = min(hi, wref)
            found = self._min_k(target, n_per, href, kw=hi)
            if found is not None or hi >= wref:
                break
            lo, hi = hi, hi * 2
        if found is None:
            return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            p = self._min_k(target, n_per, href, kw=mid)
            if p is not None:
                found, hi = p, mid
            else:
                lo = mid
        return found

    def _min_k(self, target: Target, n_per: int, href: int, double: bool = False,
               k_from: int = 1, kw: int = 1) -> GroupPlan | None:
        """The fewest row cuts (>= ``k_from``) with which the group fits, by doubling then
        bisecting (the footprint shrinks as the cuts grow)."""
        k_from = max(1, min(k_from, href))
        p = self.fit(target, n_per, k_from, double, kw)
        if p is not None:
            return p
        lo, hi = k_from, 2 * k_from
        found: GroupPlan | None = None
        while True:
            hi = min(hi, href)
            found = self.fit(target, n_per, hi, double, kw)
            if found is not None or hi >= href:
                break
            lo, hi = hi, hi * 2
        if found is None:
            return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            p = self.fit(target, n_per, mid, double, kw)
            if p is not None:
                found, hi = p, mid
            else:
                lo = mid
        return found
