"""Layer groups: runs of local layers tiled on N and H so that every live tile fits local memory.

For a candidate group and a tiling (``n_per`` batch items, ``k`` row tiles) the compiler
slices *backwards* from the group's outputs, as bmcompiler's backward slice functions do:
each stored output asks for its next rows, each node computes the hull of the rows its
consumers need, and its kernel says which input rows that takes (the halo of a window).
Every tensor's largest tile then gets a per-lane footprint (``memory.activation_lane_bytes``)
and a local address from a lifetime-based allocator; the tiling fits when the allocator's
peak is within the lane's local memory. ``partition.py`` grows a group node by node while
a tiling fits and the recomputed halo rows stay under :data:`MAX_REDUNDANCY`, and decides
what becomes of a node that fits no tiling on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import SimulatorError
from ..ir.graph import Value
from .kernels.registry import static_shape
from .lower import Lowered
from .memory import Buffer, activation_lane_bytes, constant_lane_bytes, plan
from .rows import Rows, clip, row_fn
from .target import Target

#: Largest ratio of computed to needed elements (halo rows recomputed by several tiles).
MAX_REDUNDANCY = 1.15
#: Largest number of nodes in one group (bounds compile time).
MAX_GROUP_NODES = 48


@dataclass
class Tile:
    """One tile: its batch range, the rows of every tensor it holds, what it stores."""

    n: Rows
    rows: dict[str, Rows]
    computed: dict[str, Rows]                       # node name -> output rows computed
    needs: dict[str, list[tuple[Rows, Rows] | None]]  # node -> per input (needed, clipped)
    stores: dict[str, Rows]                         # output tensor -> rows stored


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

    @property
    def node_names(self) -> list[str]:
        return [ln.node.name for ln in self.nodes]


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
        self.n = static_shape(nodes[0].node.outputs[0])[0]
        self.anchor = nodes[-1].node.outputs[0]
        self.can_split_n = all("N" in ln.axes for ln in nodes)
        # per node, in reverse order: what backward slicing needs, computed once
        self._rev = []
        for ln in reversed(nodes):
            node = ln.node
            out = node.outputs[0]
            ins = [(i, v.name, static_shape(v)[2], row_fn(ln, i, v)) for i, v in enumerate(node.inputs)
                   if v is not None and not v.is_constant]
            self._rev.append((node.name, out.name, static_shape(out)[2], "H" in ln.axes, ins,
                              len(node.inputs)))

    def slice(self, n_per: int, k: int) -> list[Tile]:
        """Backward slicing of every tile of the tiling (n_per, k)."""
        href = static_shape(self.anchor)[2]
        bounds = [round(i * href / k) for i in range(k + 1)]
        tiles = []
        for n0 in range(0, self.n, n_per):
            n1 = min(self.n, n0 + n_per)
            upto = {v.name: 0 for v in self.outputs}
            for t in range(k):
                last = t == k - 1
                req: dict[str, Rows] = {}
                for v in self.outputs:
                    h = static_shape(v)[2]
                    hi = h if last else -(-bounds[t + 1] * h // href)
                    lo = upto[v.name]
                    req[v.name] = (lo, max(lo, hi))
                computed: dict[str, Rows] = {}
                needs: dict[str, list[tuple[Rows, Rows] | None]] = {}
                for name, out_name, out_h, split_h, ins, n_in in self._rev:
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
                rows = {name: r for name, r in req.items() if r[1] >= r[0]}
                tiles.append(Tile((n0, n1), rows, computed, needs, stores))
            for v in self.outputs:
                if upto[v.name] != static_shape(v)[2]:
                    raise SimulatorError(
                        f"layer group ending at {self.nodes[-1].node.where}: tiling stores rows "
                        f"[0, {upto[v.name]}) of '{v.name}', not all {static_shape(v)[2]}",
                        hint="a kernel's input_slice is inconsistent with its op",
                    )
        return tiles

    def fit(self, target: Target, n_per: int, k: int, double: bool = False) -> GroupPlan | None:
        """The tiling (n_per, k) with its local-memory allocation, or None if it does not fit.

        ``double``: give every loaded input and stored output two buffers (ping-pong), live
        for the whole group."""
        tiles = self.slice(n_per, k)
        values = {v.name: v for v in self.inputs}
        for ln in self.nodes:
            values[ln.node.outputs[0].name] = ln.node.outputs[0]
        max_rows: dict[str, int] = {}
        for t in tiles:
            for name, (lo, hi) in t.rows.items():
                if hi - lo >= max_rows.get(name, 0):
                    max_rows[name] = hi - lo
        budget = target.lmem_bytes_per_lane
        last = len(self.nodes) - 1
        buffers: list[Buffer] = []
        for c in self.consts:
            buffers.append(Buffer(c.name, constant_lane_bytes(target, static_shape(c), c.dtype), 0, last))
        for name, rows in max_rows.items():
            v = values[name]
            n_ext = (min(n_per, self.n) if static_shape(v)[0] == self.n else 1)
            size = activation_lane_bytes(target, (n_ext, static_shape(v)[1], rows, static_shape(v)[3]), v.dtype)
            if name in self.produced:
                first = self.produced[name]
                lastu = max(first, self.last_use.get(name, first))
            else:
                first, lastu = self.first_use[name], self.last_use[name]
            if double and (name not in self.produced or name in self.stored):
                buffers.append(Buffer(name, size, 0, last))
                buffers.append(Buffer(name + "#1", size, 0, last))
            else:
                buffers.append(Buffer(name, size, first, lastu))
        for j, ln in enumerate(self.nodes):
            if ln.kernel is not None and ln.kernel.scratch_fn is not None:
                out = ln.node.outputs[0]
                r = max_rows.get(out.name, 0)
                shape = (n_per, static_shape(out)[1], r, static_shape(out)[3])
                size = int(ln.kernel.hint("scratch", ln.node, shape))
                if size > 0:
                    buffers.append(Buffer(f"scratch/{ln.node.name}", size, j, j))
        if sum(b.size for b in buffers if b.first == 0 and b.last == last) > budget:
            return None
        peak = plan(buffers, target.lmem_align_bytes)
        if peak > budget:
            return None
        done = needed = 0.0
        for ln in self.nodes:
            out = ln.node.outputs[0]
            per_row = math.prod(static_shape(out)) / static_shape(out)[2] / static_shape(out)[0]
            needed += math.prod(static_shape(out))
            for t in tiles:
                cr = t.computed.get(ln.node.name)
                if cr is not None:
                    done += (cr[1] - cr[0]) * per_row * (t.n[1] - t.n[0])
        return GroupPlan(
            self.nodes, self.inputs, self.consts, self.outputs, n_per, k, tiles,
            {b.key: (b.offset, b.size, b.first, b.last) for b in buffers}, peak,
            done / max(needed, 1.0), double,
        )

    def best(self, target: Target, start: tuple[int, int] | None = None,
             double: bool = False) -> GroupPlan | None:
        """The tiling with the fewest tiles that fits (``start``: try that tiling first);
        ``double``: then ping-pong buffers for its loads and stores, if they fit too."""
        p = self._best(target, start)
        if double and p is not None and len(p.tiles) > 1:
            # pipelining is worth a few more tiles, not many: about twice as many row cuts
            d = self._min_k(target, p.n_per, static_shape(self.anchor)[2], double=True)
            if d is not None and d.k <= 2 * p.k + 2 and d.redundancy <= max(p.redundancy, MAX_REDUNDANCY):
                return d
        return p

    def _best(self, target: Target, start: tuple[int, int] | None) -> GroupPlan | None:
        if start is not None:
            p = self.fit(target, *start)
            if p is not None:
                return p
            # a grown group rarely needs fewer cuts: search upwards from the last tiling
            p = self._min_k(target, start[0], static_shape(self.anchor)[2], k_from=start[1])
            if p is not None:
                return p
        href = static_shape(self.anchor)[2]
        n_options = [self.n]
        if self.can_split_n:
            m = self.n
            while m > 1:
                m = -(-m // 2)
                n_options.append(m)
        best: GroupPlan | None = None
        for n_per in n_options:
            p = self._min_k(target, n_per, href)
            if p is not None and (best is None or len(p.tiles) < len(best.tiles)):
                best = p
            if best is not None and best.k == 1:
                break
        return best

    def _min_k(self, target: Target, n_per: int, href: int, double: bool = False,
               k_from: int = 1) -> GroupPlan | None:
        """The fewest row cuts (>= ``k_from``) with which the group fits, by doubling then
        bisecting (the footprint shrinks as the cuts grow)."""
        k_from = max(1, min(k_from, href))
        p = self.fit(target, n_per, k_from, double)
        if p is not None:
            return p
        lo, hi = k_from, 2 * k_from
        found: GroupPlan | None = None
        while True:
            hi = min(hi, href)
            found = self.fit(target, n_per, hi, double)
            if found is not None or hi >= href:
                break
            lo, hi = hi, hi * 2
        if found is None:
            return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            p = self.fit(target, n_per, mid, double)
            if p is not None:
                found, hi = p, mid
            else:
                lo = mid
        return found
