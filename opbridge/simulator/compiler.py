"""``compile(graph, target)``: lowering, partition into units, the DDR plan and the instructions."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SimulatorError
from ..ir.graph import Graph, Value
from ..ir.types import format_shape, is_static
from .kernels import KernelRegistry
from .kernels.registry import elementwise_cost, static_shape
from .layergroup import GroupCandidate, GroupPlan, Tile
from .lower import CPU, Lowered, Placement, lower
from .memory import (
    Buffer,
    activation_lane_bytes,
    align,
    constant_lane_bytes,
    gdma_bytes,
    plan,
    tile_lane_bytes,
    view4,
)
from .partition import PlannedUnit, partition
from .program import Program
from .rows import Rows, clip, col_elems, gshape, row_fn, row_layout, sliced_shape
from .schema import (
    Alloc,
    Compute,
    DdrPlan,
    DdrTensor,
    GlobalOp,
    GlobalUnit,
    GroupUnit,
    HostOp,
    HostUnit,
    Instruction,
    Load,
    Operand,
    Store,
    StreamUnit,
    Unit,
)
from .stream import RowTile, StreamPlan
from .target import Target, itemsize, resolve_target


def _nbytes(v: Value) -> int:
    return math.prod(static_shape(v)) * itemsize(v.dtype)


def _gdma_nbytes(v: Value, target: Target) -> int:
    """The bytes GDMA moves for a whole tensor (an activation in the 4N layout: whole
    groups of four batch items)."""
    if v.is_constant:
        return _nbytes(v)
    return gdma_bytes(target, static_shape(v), v.dtype)


def _check_static(graph: Graph) -> set[str]:
    """Check that the graph's inputs are static; returns the nodes that must run on the host
    because a value they read or write has a shape only the run knows (a data-dependent op's
    output, and whatever depends on its size). Those values live in host memory, not DDR."""
    for v in graph.values().values():
        if v.kind != "tensor":  # DDR holds tensors; a list of them has no one place there
            raise SimulatorError(
                f"graph '{graph.name}': value '{v.name}' is a {v.kind}; the simulator compiles "
                "tensors only", hint="run the graph with opbridge.interpret (opbridge run)")
    for v in graph.inputs:  # the user's fix is on an input: name it, and its symbolic dims
        sym = [str(d) for d in v.shape if not isinstance(d, int)]
        if sym:
            example = ",".join(str(d) if isinstance(d, int) else "1" for d in v.shape)
            raise SimulatorError(
                f"graph '{graph.name}': input '{v.name}' has symbolic dim(s) {', '.join(sym)} in "
                f"{format_shape(v.shape)}; compiling needs static shapes",
                hint=f"convert or compile with --input-shape {v.name}={example} "
                f"(input_shapes={{'{v.name}': (...)}} in Python)",
            )
    host: set[str] = set()
    for node in graph.nodes:
        if any(v is not None and not is_static(v.shape) for v in (*node.inputs, *node.outputs)):
            host.add(node.name)
    return host


def _host_placement(host: set[str], placement: Placement | None) -> Placement:
    """The user's placement, with the nodes of run-time shapes on the host: the TPU's memory
    plans are static, so only the host can hold a tensor whose size the run decides."""

    def place(node: Any) -> str | None:
        if node.name in host:
            return CPU
        return placement(node) if placement is not None else None

    return place


def _is_host_value(v: Value) -> bool:
    return not is_static(v.shape)


def _ddr_plan(graph: Graph, units: list[PlannedUnit], target: Target) -> DdrPlan:
    """One DDR address space: weights first, then activations with lifetime-based reuse;
    a reshape's or an in-place layer's output shares its input's bytes (:func:`_ddr_aliases`)."""
    unit_of: dict[str, int] = {}
    for ui, u in enumerate(units):
        for ln in (u.nodes if isinstance(u, (GroupPlan, StreamPlan)) else [u]):
            unit_of[ln.node.name] = ui
    end = len(units)
    outputs = {v.name for v in graph.outputs}
    in_ddr: dict[str, Value] = {}
    first: dict[str, int] = {}
    for v in graph.inputs:
        in_ddr[v.name] = v
        first[v.name] = 0
    for ui, u in enumerate(units):
        produced = u.outputs if isinstance(u, (GroupPlan, StreamPlan)) else u.node.outputs
        for v in produced:
            if _is_host_value(v):  # sized by the run: host memory (see _check_static)
                continue
            in_ddr[v.name] = v
            first[v.name] = ui
    tensors: dict[str, DdrTensor] = {}
    off = 0
    used_consts = sorted({v.name for n in graph.nodes for v in n.inputs
                          if v is not None and v.is_constant} | (outputs & set(graph.constants)))
    for name in used_consts:
        c = graph.constants[name]
        tensors[name] = DdrTensor(off, tuple(static_shape(c)), c.dtype, _nbytes(c), "weight")
        off = align(off + _nbytes(c), target.ddr_align_bytes)
    weights_bytes = off
    last: dict[str, int] = {}
    for name, v in in_ddr.items():
        last[name] = end if name in outputs else max(
            [unit_of[u.name] for u in v.users if u.name in unit_of] + [first[name]])
    alias = _ddr_aliases(units, in_ddr, last, outputs)
    for name, root in alias.items():
        last[root] = max(last[root], last[name])
    buffers = [Buffer(name, _nbytes(v), first[name], last[name]) for name, v in in_ddr.items()
               if name not in alias]
    buffers += _scratch_buffers(units, target)
    peak = plan(buffers, target.ddr_align_bytes)
    for b in buffers:
        if b.key.startswith("scratch/"):
            tensors[b.key] = DdrTensor(weights_bytes + b.offset, (b.size,), "u8", b.size, "scratch")
            continue
        v = in_ddr[b.key]
        tensors[b.key] = DdrTensor(weights_bytes + b.offset, tuple(static_shape(v)), v.dtype, b.size,
                                   "activation")
    for name, root in alias.items():
        v = in_ddr[name]
        tensors[name] = DdrTensor(tensors[root].addr, tuple(static_shape(v)), v.dtype, _nbytes(v),
                                  "activation", alias_of=root)
    return DdrPlan(
        tensors=tensors,
        weights_bytes=weights_bytes,
        activation_peak_bytes=peak,
        activation_no_reuse_bytes=sum(align(b.size, target.ddr_align_bytes) for b in buffers)
        + sum(align(_nbytes(in_ddr[n]), target.ddr_align_bytes) for n in alias),
        total_bytes=weights_bytes + peak,
    )


def _ddr_aliases(units: list[PlannedUnit], in_ddr: dict[str, Value], last: dict[str, int],
                 outputs: set[str]) -> dict[str, str]:
    """Outputs of single layers that share their input 0's DDR bytes, each -> the tensor that
    owns the bytes: a ``just_reshape`` kernel's (the same bytes under another shape), and an
    ``inplace`` kernel's when nothing reads the input, or a tensor sharing its bytes, later."""
    alias: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    for ui, u in enumerate(units):
        if isinstance(u, (GroupPlan, StreamPlan)) or u.kernel is None or len(u.node.outputs) != 1:
            continue
        k, node = u.kernel, u.node
        x, y = (node.inputs[0] if node.inputs else None), node.outputs[0]
        if x is None or x.name not in in_ddr or y.name not in in_ddr or x.dtype != y.dtype:
            continue
        root = alias.get(x.name, x.name)
        if k.reshape_only and _nbytes(x) == _nbytes(y):
            pass
        elif k.in_place and static_shape(x) == static_shape(y):
            group = [root, *members.get(root, [])]
            if any(m in outputs or last[m] > ui for m in group):
                continue
        else:
            continue
        alias[y.name] = root
        members.setdefault(root, []).append(y.name)
    return alias


def _scratch_buffers(units: list[PlannedUnit], target: Target) -> list[Buffer]:
    """DDR scratch buffers of global layers whose kernel asks for one (bmcompiler's
    ``get_global_buffer_size``): ``lanes`` times the kernel's per-lane bytes, live for the layer."""
    out = []
    for ui, u in enumerate(units):
        if isinstance(u, (GroupPlan, StreamPlan)) or u.kernel is None or u.kernel.scratch_fn is None:
            continue
        shape = tuple(static_shape(u.node.outputs[0])) if u.node.outputs else ()
        size = u.kernel.scratch_lane_bytes(u.node, shape, target.lanes) * target.lanes
        if size > 0:
            out.append(Buffer(f"scratch/{u.node.name}", size, ui, ui))
    return out


def _diff_attrs(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in new.items():
        if k not in base or base[k] != v:
            out[k] = list(v) if isinstance(v, tuple) else v
    return out


def _tile_attrs(ln: Lowered, rows: Rows, needs: list[tuple[Rows, Rows] | None],
                cols: Rows | None = None, needs_w: list[tuple[Rows, Rows] | None] | None = None
                ) -> dict[str, Any]:
    """The attributes a tile overrides (a convolution's pads at the tile edges), as JSON
    values; ``cols`` / ``needs_w`` for a tile cut along W too."""
    k = ln.kernel
    if k is None or (k.tile_attrs_fn is None and (cols is None or k.tile_attrs_w_fn is None)):
        return {}
    full = dict(ln.node.attrs)
    if k.tile_attrs_fn is not None:
        full = k.hint("tile_attrs", ln.node, rows[0], rows[1],
                      [x[0] if x else None for x in needs], [x[1] if x else None for x in needs])
    if cols is not None and needs_w is not None and k.tile_attrs_w_fn is not None:
        full = k.hint("tile_attrs_w", _TileNode(ln.node, full), cols[0], cols[1],
                      [x[0] if x else None for x in needs_w], [x[1] if x else None for x in needs_w])
    return _diff_attrs(ln.node.attrs, full)


class _TileNode:
    """A node seen with a tile's attributes (the W hints get those the H hint gave)."""

    def __init__(self, node: Any, attrs: dict[str, Any]) -> None:
        self._node = node
        self.attrs = attrs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._node, name)


def _cost(ln: Lowered, shape: tuple[int, ...]) -> float:
    if ln.kernel is None:
        return elementwise_cost(ln.node, shape)
    return float(ln.kernel.hint("cost", ln.node, shape))


def _compute(ln: Lowered, target: Target, group: int | None, tile: int,
             ins: list[Operand | None], out: Operand, attrs: dict[str, Any],
             scratch: Rows | None = None) -> Compute:
    shape = out.shape if out.w is None else (*out.shape[:3], out.w[1] - out.w[0])
    return Compute(group=group, tile=tile, node=ln.node.name, ins=tuple(ins), out=out, attrs=attrs,
                   flops=_cost(ln, shape),
                   eff=_efficiency(target, shape, ln.node.outputs[0].dtype,
                                   group is not None and row_layout(ln.node.outputs[0])),
                   scratch=scratch)


class _GroupEmitter:
    """The instructions of one layer group: its constants once, then per tile the loads, the
    computes in node order and the stores (with ping-pong buffers, the next tile's loads
    are issued before this tile's computes)."""

    def __init__(self, gi: int, g: GroupPlan, target: Target, instrs: list[Instruction]) -> None:
        self.gi, self.g, self.target, self.instrs = gi, g, target, instrs
        self.n_group = gshape(g.nodes[0].node.outputs[0])[0]
        first_use: dict[str, int] = {}
        for j, ln in enumerate(g.nodes):
            for v in ln.node.inputs:
                if v is not None and not v.is_constant:
                    first_use.setdefault(v.name, j)
        #: node index -> the group inputs first read there (loaded just before it)
        self.loads_at: dict[int, list[Value]] = {}
        for v in g.inputs:
            self.loads_at.setdefault(first_use[v.name], []).append(v)

    def tile_shape(self, v: Value, t: Tile) -> tuple[int, ...]:
        lo, hi = t.rows[v.name]
        shp = gshape(v)
        n = (t.n[1] - t.n[0]) if shp[0] == self.n_group else shp[0]
        if self.g.kw > 1:
            c0, c1 = t.cols.get(v.name, (0, 0))
            return (n, shp[1], hi - lo, (c1 - c0) * col_elems(v))
        return self.g.tile_dims(v, n, hi - lo, shp[3])

    def cols(self, v: Value, t: Tile) -> Rows | None:
        """The columns of ``v`` a tile holds (None: all of them, the group is not cut on W)."""
        return t.cols.get(v.name, (0, 0)) if self.g.kw > 1 else None

    def batch(self, v: Value, t: Tile) -> Rows:
        n = gshape(v)[0]
        return t.n if n == self.n_group else (0, n)

    def buf(self, name: str, ti: int) -> str:
        """The allocation a tile uses for a tensor (ping-pong buffers alternate by tile)."""
        g = self.g
        return name + "#1" if g.double and ti % 2 and name + "#1" in g.alloc else name

    def emit(self) -> None:
        g = self.g
        for c in g.consts:
            shp = static_shape(c)
            self.instrs.append(Load(
                group=self.gi, tile=-1, tensor=c.name, buf=c.name, lmem=g.alloc[c.name][0], n=None,
                h=None, c=None, sel=None, const=True, bytes=_nbytes(c),
                lane_bytes=constant_lane_bytes(self.target, shp, c.dtype)))
        if g.double:
            for v in g.inputs:
                self.load(v, 0)
        for ti, t in enumerate(g.tiles):
            if g.double and ti + 1 < len(g.tiles):
                for v in g.inputs:  # prefetch the next tile into the other buffer
                    self.load(v, ti + 1)
            for j, ln in enumerate(g.nodes):
                if not g.double:
                    for v in self.loads_at.get(j, []):
                        self.load(v, ti)
                r = t.computed.get(ln.node.name)
                if r is not None:
                    self.compute(ln, ti, t, r)
                out = ln.node.outputs[0]
                s = t.stores.get(out.name)
                if s is not None:
                    self.store(out, ti, t, s)

    def load(self, v: Value, ti: int) -> None:
        t = self.g.tiles[ti]
        if v.name not in t.rows or t.rows[v.name][0] >= t.rows[v.name][1]:
            return
        w = self.cols(v, t)
        if w is not None and w[0] >= w[1]:
            return
        shp = self.tile_shape(v, t)
        b = self.buf(v.name, ti)
        ce = col_elems(v)  # GDMA moves the view's elements: a volume's rows of W
        h, c = t.rows[v.name], None
        axis = self.g.cut_axis.get(v.name)
        if axis is not None:  # a strided GDMA of the slice along C or W, every row
            h, c, w = (0, gshape(v)[2]), (h if axis == 1 else None), (h if axis == 3 else None)
        self.instrs.append(Load(
            group=self.gi, tile=ti, tensor=v.name, buf=b, lmem=self.g.alloc[b][0],
            n=self.batch(v, t), h=h, c=c, sel=None, const=False,
            bytes=gdma_bytes(self.target, shp, v.dtype),
            lane_bytes=tile_lane_bytes(self.target, shp, v.dtype, row_layout(v)),
            w=None if w is None else (w[0] * ce, w[1] * ce)))

    def operand(self, v: Value, ti: int, t: Tile, h: Rows | None, w: Rows | None = None) -> Operand:
        b = self.buf(v.name, ti)
        shp = self.tile_shape(v, t)
        lane = tile_lane_bytes(self.target, shp, v.dtype, row_layout(v))
        if len(v.shape) == 5:  # a volume's tile, (n, C, d, h*W) in the view: its kernel's rank 5
            width = static_shape(v)[4]
            shp = (*shp[:3], shp[3] // width, width)
        return Operand(tensor=v.name, buf=b, lmem=self.g.alloc[b][0], shape=shp,
                       lane_bytes=lane, h=h, n=None, const=False, w=w)

    def compute(self, ln: Lowered, ti: int, t: Tile, r: Rows) -> None:
        node = ln.node
        needs = t.needs[node.name]
        cut_w = self.g.kw > 1
        rw = t.computed_w[node.name] if cut_w else None
        needs_w = t.needs_w[node.name] if cut_w else None
        ins: list[Operand | None] = []
        for i, v in enumerate(node.inputs):
            if v is None or self.g.streamed(node.name, i) in self.g.alloc:
                ins.append(None)  # absent, or a streamed weight: loaded chunk by chunk below
            elif v.is_constant:
                ins.append(self.const_view(ln, i, v, r, t.n, rw))
            else:
                nd = needs[i]
                assert nd is not None
                tlo = t.rows[v.name][0]
                w = None
                if needs_w is not None:
                    ndw = needs_w[i]
                    assert ndw is not None
                    w = (ndw[1][0] - t.cols[v.name][0], ndw[1][1] - t.cols[v.name][0])
                # an input cut along C or W has one reader: its tile is what that reader needs
                h = None if v.name in self.g.cut_axis else (nd[1][0] - tlo, nd[1][1] - tlo)
                ins.append(self.operand(v, ti, t, h, w))
        out = self.operand(node.outputs[0], ti, t, None)
        sc = self.g.alloc.get(f"scratch/{node.name}")
        attrs = _tile_attrs(ln, r, needs, rw, needs_w)
        scratch = None if sc is None else (sc[0], sc[0] + sc[1])
        chunks = self.g.streams.get(node.name, [None])
        for ci, f in enumerate(chunks):  # type: ignore[arg-type]
            if f is not None:  # a chunk of output features, after loading its weight slices
                ins = self.load_chunk(ln, ti, ins, f, ti * len(chunks) + ci)
                out = dataclasses.replace(out, w=f)
            self.instrs.append(_compute(ln, self.target, self.gi, ti, ins, out, attrs, scratch))

    def load_chunk(self, ln: Lowered, ti: int, ins: list[Operand | None], f: Rows, seq: int
                   ) -> list[Operand | None]:
        """Load the slices of a streamed node's weights that output features ``f`` need (again
        for every tile: the GDMA streaming costs) into the even or odd chunk buffer (``seq``:
        the chunk's place in the node's sequence); ``ins`` with them in place."""
        node, k = ln.node, ln.kernel
        assert k is not None
        ins = list(ins)
        for i, v in enumerate(node.inputs):
            key = self.g.streamed(node.name, i, seq)
            if key not in self.g.alloc:  # one chunk buffer (two did not fit)
                key = self.g.streamed(node.name, i)
            if v is None or key not in self.g.alloc:
                continue
            sl = k.hint("feature_slice", node, i, f[0], f[1])
            shp = sliced_shape(static_shape(v), sl)
            addr = self.g.alloc[key][0]
            lane = constant_lane_bytes(self.target, shp, v.dtype)
            self.instrs.append(Load(
                group=self.gi, tile=ti, tensor=v.name, buf=key, lmem=addr, n=None, h=None, c=None,
                sel=sl, const=True, bytes=math.prod(shp) * itemsize(v.dtype), lane_bytes=lane))
            ins[i] = Operand(tensor=v.name, buf=key, lmem=addr, shape=tuple(shp), lane_bytes=lane,
                             h=None, n=None, const=True)
        return ins

    def store(self, out: Value, ti: int, t: Tile, s: Rows) -> None:
        shp = self.tile_shape(out, t)
        b = self.buf(out.name, ti)
        ce = col_elems(out)  # the view's elements: a volume's rows of W
        w = t.stores_w[out.name] if self.g.kw > 1 else None
        if w is not None:
            w = (w[0] * ce, w[1] * ce)
        width = shp[3] if w is None else w[1] - w[0]
        self.instrs.append(Store(
            group=self.gi, tile=ti, tensor=out.name, buf=b, lmem=self.g.alloc[b][0], tile_shape=shp,
            tile_h0=t.rows[out.name][0], n=self.batch(out, t), h=s, c=None,
            bytes=gdma_bytes(self.target, (shp[0], shp[1], s[1] - s[0], width), out.dtype),
            lane_bytes=tile_lane_bytes(self.target, shp, out.dtype, row_layout(out)), w=w,
            tile_w0=t.cols[out.name][0] * ce if w is not None else 0))

    def const_view(self, ln: Lowered, i: int, v: Value, r: Rows, n: Rows,
                   rw: Rows | None = None) -> Operand:
        """A constant input of a tile: resident whole in local memory, but an operand shaped
        like the activations (N, C, H, W) is read at the tile's rows, columns (``rw``: the
        group is cut along W) and batch items."""
        shp = static_shape(v)
        h: Rows | None = None
        w: Rows | None = None
        nr: Rows | None = None
        if len(shp) == 4 and len(ln.node.outputs[0].shape) == 4:
            hv = shp[2]
            lo, hi = row_fn(ln, i, v)(r[0], r[1])
            if (lo, hi) != (0, hv):
                h = clip((lo, hi), hv)
            if rw is not None:
                wlo, whi = row_fn(ln, i, v, "W")(rw[0], rw[1])
                if (wlo, whi) != (0, shp[3]):
                    w = clip((wlo, whi), shp[3])
            if shp[0] == self.n_group and self.n_group > 1 and tuple(n) != (0, self.n_group):
                nr = n
        return Operand(tensor=v.name, buf=v.name, lmem=self.g.alloc[v.name][0], shape=tuple(shp),
                       lane_bytes=constant_lane_bytes(self.target, shp, v.dtype), h=h, n=nr, const=True,
                       w=w)


class _StreamEmitter:
    """The instructions of a streamed layer: per chunk of output channels, load its weight
    slices; per row tile, load the input rows, compute, store the chunk's rows."""

    def __init__(self, sp: StreamPlan, target: Target, instrs: list[Instruction]) -> None:
        self.sp, self.target, self.instrs = sp, target, instrs
        self.node = sp.ln.node
        self.oshape = static_shape(self.node.outputs[0])

    def emit(self) -> None:
        for c in self.sp.chunks:
            const_in = self.load_consts(c)
            for ti, t in enumerate(self.sp.tiles):
                self.tile(c, ti, t, const_in)

    def load_consts(self, c: Rows) -> dict[int, Operand]:
        const_in: dict[int, Operand] = {}
        for i, v in enumerate(self.node.inputs):
            if v is None or not v.is_constant:
                continue
            sl = self.sp.const_slice(i, c)
            shp = sliced_shape(static_shape(v), sl)
            addr = self.sp.alloc[v.name][0]
            lane = constant_lane_bytes(self.target, shp, v.dtype)
            self.instrs.append(Load(
                group=None, tile=-1, tensor=v.name, buf=v.name, lmem=addr, n=None, h=None, c=None,
                sel=sl, const=True, bytes=math.prod(shp) * itemsize(v.dtype), lane_bytes=lane))
            const_in[i] = Operand(tensor=v.name, buf=v.name, lmem=addr, shape=tuple(shp),
                                  lane_bytes=lane, h=None, n=None, const=True)
        return const_in

    def load_input(self, i: int, v: Value, c: Rows, ti: int, t: RowTile) -> Operand:
        shp0 = static_shape(v)
        nd = t.needs[i]
        assert nd is not None
        sl = self.sp.const_slice(i, c)
        cr = (sl[1], sl[2]) if sl is not None and sl[0] == 1 else None
        batched = shp0[0] == self.oshape[0]
        tshape = (t.n[1] - t.n[0] if batched else shp0[0], (cr[1] - cr[0]) if cr else shp0[1],
                  nd[1][1] - nd[1][0], shp0[3])
        addr = self.sp.alloc[v.name][0]
        lane = activation_lane_bytes(self.target, tshape, v.dtype)
        self.instrs.append(Load(
            group=None, tile=ti, tensor=v.name, buf=v.name, lmem=addr,
            n=t.n if batched else (0, shp0[0]), h=nd[1], c=cr, sel=None, const=False,
            bytes=gdma_bytes(self.target, tshape, v.dtype), lane_bytes=lane))
        return Operand(tensor=v.name, buf=v.name, lmem=addr, shape=tshape, lane_bytes=lane, h=None,
                       n=None, const=False)

    def tile(self, c: Rows, ti: int, t: RowTile, const_in: dict[int, Operand]) -> None:
        ins: list[Operand | None] = []
        for i, v in enumerate(self.node.inputs):
            if v is None:
                ins.append(None)
            else:
                ins.append(const_in[i] if i in const_in else self.load_input(i, v, c, ti, t))
        out = self.node.outputs[0]
        ot = (t.n[1] - t.n[0], c[1] - c[0], t.rows[1] - t.rows[0], self.oshape[3])
        addr = self.sp.alloc[out.name][0]
        lane = activation_lane_bytes(self.target, ot, out.dtype)
        o = Operand(tensor=out.name, buf=out.name, lmem=addr, shape=ot, lane_bytes=lane, h=None,
                    n=None, const=False)
        sc = self.sp.alloc.get(f"scratch/{self.node.name}")
        self.instrs.append(_compute(self.sp.ln, self.target, None, ti, ins, o,
                                    _tile_attrs(self.sp.ln, t.rows, t.needs),
                                    None if sc is None else (sc[0], sc[0] + sc[1])))
        self.instrs.append(Store(
            group=None, tile=ti, tensor=out.name, buf=out.name, lmem=addr, tile_shape=ot,
            tile_h0=t.rows[0], n=t.n, h=t.rows, c=c, bytes=gdma_bytes(self.target, ot, out.dtype),
            lane_bytes=lane))


def _efficiency(target: Target, shape: tuple[int, ...], dtype: str, rows: bool = False) -> float:
    """Fraction of the lanes' EUs a tile of this shape keeps busy (channels over lanes, H*W
    over the EU width; ``rows``: a row-layout tile, its rows over lanes, features over the EU)."""
    if len(shape) == 5:
        shape = view4(shape)
    if len(shape) != 4:
        return 1.0
    n, c, h, w = shape
    lanes = target.lanes
    eu = target.eu_elems(dtype)
    if rows:
        r = n * c * h
        return max((r / (-(-r // lanes) * lanes) if r else 1.0) * (w / align(w, eu) if w else 1.0), 1e-3)
    c_eff = c / (-(-c // lanes) * lanes) if c else 1.0  # an empty tensor: no work to spread
    hw = h * w
    hw_eff = hw / align(hw, eu) if hw else 1.0
    return max(c_eff * hw_eff, 1e-3)


def _alloc(alloc: dict[str, tuple[int, int, int, int]]) -> dict[str, Alloc]:
    return {k: Alloc(*v) for k, v in alloc.items()}


def _emit_unit(u: PlannedUnit, gi: int, target: Target, instrs: list[Instruction],
               ddr: DdrPlan) -> Unit:
    """Append the instructions of one planned unit (``gi``: its index if it is a layer
    group) and return the unit that records them."""
    start = len(instrs)
    if isinstance(u, GroupPlan):
        _GroupEmitter(gi, u, target, instrs).emit()
        return GroupUnit(
            index=gi, nodes=tuple(u.node_names), n_per=u.n_per, k=u.k, tiles=len(u.tiles),
            alloc=_alloc(u.alloc), lmem_peak=u.lmem_peak, redundancy=round(u.redundancy, 4),
            double_buffered=u.double, inputs=tuple(v.name for v in u.inputs),
            outputs=tuple(v.name for v in u.outputs), consts=tuple(v.name for v in u.consts),
            instrs=(start, len(instrs)), kw=u.kw, aliases=dict(u.aliases), lmem_saved=u.lmem_saved)
    if isinstance(u, StreamPlan):
        _StreamEmitter(u, target, instrs).emit()
        return StreamUnit(
            nodes=(u.ln.node.name,), op=u.ln.node.op, chunks=len(u.chunks), row_tiles=len(u.tiles),
            tiles=len(u.chunks) * len(u.tiles), alloc=_alloc(u.alloc), lmem_peak=u.lmem_peak,
            instrs=(start, len(instrs)))
    node = u.node
    if u.placement == CPU and any(_is_host_value(v) for v in (*node.inputs, *node.outputs) if v is not None):
        # run-time sizes: the cost counts what the compiler knows, the static tensors it moves
        known = [v for v in (*node.inputs, *node.outputs) if v is not None and not _is_host_value(v)]
        nbytes = sum(_nbytes(v) for v in known)
        instrs.append(HostOp(node=node.name, bytes=nbytes, flops=float(sum(math.prod(static_shape(v))
                                                                           for v in known)), eff=1.0))
        return HostUnit(nodes=(node.name,), op=node.op, instrs=(start, start + 1))
    nbytes = sum(_gdma_nbytes(v, target) for v in node.inputs if v is not None) + sum(
        _gdma_nbytes(v, target) for v in node.outputs)
    oshape = tuple(static_shape(node.outputs[0])) if node.outputs else ()
    flops = _cost(u, oshape)
    eff = _efficiency(target, oshape, node.outputs[0].dtype) if oshape else 1.0
    span = (start, start + 1)
    if u.placement == CPU:
        instrs.append(HostOp(node=node.name, bytes=nbytes, flops=flops, eff=eff))
        return HostUnit(nodes=(node.name,), op=node.op, instrs=span)
    out = ddr.tensors.get(node.outputs[0].name) if node.outputs else None
    if out is not None and out.alias_of is not None and u.kernel is not None and u.kernel.reshape_only:
        # the output is the input's bytes: nothing moves, nothing runs
        instrs.append(GlobalOp(node=node.name, bytes=0, flops=0.0, eff=eff, alias=True))
    else:
        scratch = f"scratch/{node.name}"
        instrs.append(GlobalOp(node=node.name, bytes=nbytes, flops=flops, eff=eff,
                               scratch=scratch if scratch in ddr.tensors else None))
    return GlobalUnit(nodes=(node.name,), op=node.op, fits_no_tile=bool(u.local), instrs=span)


def _emit(planned: list[PlannedUnit], target: Target, ddr: DdrPlan) -> tuple[list[Unit], list[Instruction]]:
    """The units and instruction stream of planned units, layer groups numbered in order."""
    instrs: list[Instruction] = []
    units: list[Unit] = []
    groups = 0
    for u in planned:
        unit = _emit_unit(u, groups, target, instrs, ddr)
        groups += isinstance(unit, GroupUnit)
        units.append(unit)
    return units, instrs


def _unit_ddr(units: list[PlannedUnit], target: Target) -> DdrPlan:
    """A DDR of their own for a few planned units: every tensor they read or write (and every
    global layer's scratch) at its own aligned place, weights first, no reuse."""
    consts: dict[str, Value] = {}
    acts: dict[str, Value] = {}
    for u in units:
        for ln in (u.nodes if isinstance(u, (GroupPlan, StreamPlan)) else [u]):
            for v in (*ln.node.inputs, *ln.node.outputs):
                if v is not None and is_static(v.shape):
                    (consts if v.is_constant else acts)[v.name] = v
    tensors: dict[str, DdrTensor] = {}
    off = weights = 0
    for region, values in (("weight", consts), ("activation", acts)):
        weights = off
        for name, v in values.items():
            tensors[name] = DdrTensor(off, tuple(static_shape(v)), v.dtype, _nbytes(v), region)
            off = align(off + _nbytes(v), target.ddr_align_bytes)
    for b in _scratch_buffers(units, target):
        tensors[b.key] = DdrTensor(off, (b.size,), "u8", b.size, "scratch")
        off = align(off + b.size, target.ddr_align_bytes)
    return DdrPlan(tensors=tensors, weights_bytes=weights, activation_peak_bytes=off - weights,
                   activation_no_reuse_bytes=off - weights, total_bytes=max(off, 1))


def unit_estimator(graph: Graph, target: Target) -> Any:
    """What a run of planned units of ``graph`` takes on ``target``, in ms, as the cost model
    estimates it: the units compiled on their own, in order, with a DDR of their own, and
    scheduled by :func:`~.cost.profile` (launch and the syncs between units included). The
    partition compares a layer group with other ways to run its layers through it. What the
    scheduler needs of the whole graph is found once, here, so an estimate costs what its
    units do."""
    from .cost import graph_facts, profile

    facts = graph_facts(graph)

    def estimate(units: list[PlannedUnit]) -> float:
        ddr = _unit_ddr(units, target)
        out, instrs = _emit(units, target, ddr)
        return float(profile(Program(graph, target, out, instrs, ddr), facts).est_latency_ms)

    return estimate


def _compile_dynamic(graph: Graph, target: Target, max_shapes: Mapping[str, Sequence[int]],
                     kernels: KernelRegistry | None, placement: Placement | None, per_layer: bool) -> Any:
    from .dynamic import DynamicProgram

    if all(is_static(v.shape) for v in graph.inputs):
        raise SimulatorError(
            f"dynamic compile: graph '{graph.name}' has no symbolic input dims, so no input can "
            "be smaller than the compiled one",
            hint="convert without --input-shape to keep the model's symbolic dims, and give their "
            "largest sizes to compile --dynamic --input-shape")
    return DynamicProgram(graph, max_shapes, target, kernels=kernels, placement=placement,
                          per_layer=per_layer)


def _store_every_layer(u: PlannedUnit, target: Target, every: set[str]) -> PlannedUnit:
    """A layer group planned again with every node's output stored, on the tiling the real
    program uses (batch items and row cuts), so a kernel that goes wrong on tiles goes wrong
    here too; single-buffered, as ping-pong buffers for every output rarely fit. Where even that
    does not fit, the fewest tiles that do; failing that, the group as it was."""
    if not isinstance(u, GroupPlan):
        return u
    cand = GroupCandidate(u.nodes, every)
    return cand.fit(target, u.n_per, u.k) or cand.best(target, start=(u.n_per, u.k)) or u


def _with_lmem_kib(target: Target, lmem_kib: Any) -> Target:
    """``target`` with ``lmem_kib`` KiB of local memory per lane (``--lmem-kib``)."""
    if isinstance(lmem_kib, bool) or not isinstance(lmem_kib, int) or lmem_kib < 1:
        raise SimulatorError(f"lmem_kib = {lmem_kib!r}: give the local memory per lane as a whole number "
                             "of KiB >= 1", hint="e.g. lmem_kib=64 (--lmem-kib 64 on the command line)")
    return Target.from_dict({**target.to_dict(), "lmem_bytes_per_lane": lmem_kib * 1024})


def compile(  # noqa: A001 - the public name DESIGN.md gives it
    graph: Graph,
    target: str | os.PathLike[str] | Target | None = "bm1684",
    *,
    kernels: KernelRegistry | None = None,
    placement: Placement | None = None,
    per_layer: bool = False,
    dynamic: bool = False,
    max_shapes: Mapping[str, Sequence[int]] | None = None,
    lmem_kib: int | None = None,
) -> Any:
    """Compile ``graph`` for ``target`` (a preset name, a target JSON file or a Target) into a
    runnable Program; ``lmem_kib`` overrides the target's local memory per lane, in KiB.

    ``per_layer`` compiles a debugging variant: the same layer groups cut into the same tiles,
    but every layer's output is also stored to DDR (see :func:`_store_every_layer`), so
    ``run(keep_intermediates=True)`` returns every layer's output for validation to compare.

    ``dynamic`` (with ``max_shapes``, input name -> largest sizes, for a graph whose inputs keep
    symbolic dims) returns a :class:`opbridge.simulator.dynamic.DynamicProgram`: compiled for
    the largest shapes, it runs any smaller ones along the symbolic dims."""
    if not isinstance(graph, Graph):
        raise SimulatorError(f"compile() takes an opbridge Graph, got {type(graph).__name__}",
                             hint="load or convert the model first: ob.load / ob.convert")
    tgt = resolve_target(target)
    if lmem_kib is not None:
        tgt = _with_lmem_kib(tgt, lmem_kib)
    if dynamic:
        return _compile_dynamic(graph, tgt, max_shapes or {}, kernels, placement, per_layer)
    host = _check_static(graph)
    tgt.check_dtypes(graph)
    lowered = lower(graph, kernels=kernels, placement=_host_placement(host, placement) if host else placement)
    planned = partition(lowered, tgt, {v.name for v in graph.outputs}, unit_estimator(graph, tgt))
    if per_layer:
        every = {v.name for n in graph.nodes for v in n.outputs}
        planned = [_store_every_layer(u, tgt, every) for u in planned]
    ddr = _ddr_plan(graph, planned, tgt)
    units, instrs = _emit(planned, tgt, ddr)
    prog = Program(graph, tgt, units, instrs, ddr)
    prog.kernels = kernels
    return prog
