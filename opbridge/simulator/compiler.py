"""``compile(graph, target)``: lowering, layer groups, the DDR plan and the instruction list."""

from __future__ import annotations

import math
from typing import Any

from ..errors import SimulatorError
from ..ir.graph import Graph, Value
from .kernels import KernelRegistry
from .kernels.registry import elementwise_cost, static_shape
from .layergroup import GroupPlan, form_groups, row_fn
from .lower import CPU, Lowered, Placement, lower
from .memory import Buffer, activation_lane_bytes, align, constant_lane_bytes, plan
from .program import Program
from .stream import StreamPlan, sliced_shape
from .target import Target, itemsize, resolve_target


def _nbytes(v: Value) -> int:
    return math.prod(static_shape(v)) * itemsize(v.dtype)


def _check_static(graph: Graph) -> None:
    for v in graph.values().values():
        if not all(isinstance(d, int) for d in v.shape):
            raise SimulatorError(
                f"graph '{graph.name}': value '{v.name}' has a symbolic shape {list(v.shape)}",
                hint="convert the model with --input-shape NAME=1,3,224,224 to fix its shapes",
            )


def _ddr_plan(graph: Graph, units: list[Any], target: Target) -> dict[str, Any]:
    """One DDR address space: weights first, then activations with lifetime-based reuse."""
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
            in_ddr[v.name] = v
            first[v.name] = ui
    tensors: dict[str, dict[str, Any]] = {}
    off = 0
    used_consts = sorted({v.name for n in graph.nodes for v in n.inputs
                          if v is not None and v.is_constant} | (outputs & set(graph.constants)))
    for name in used_consts:
        c = graph.constants[name]
        tensors[name] = {"addr": off, "shape": list(static_shape(c)), "dtype": c.dtype,
                         "nbytes": _nbytes(c), "region": "weight"}
        off = align(off + _nbytes(c), target.ddr_align_bytes)
    weights_bytes = off
    buffers = []
    for name, v in in_ddr.items():
        last = end if name in outputs else max(
            [unit_of[u.name] for u in v.users if u.name in unit_of] + [first[name]])
        buffers.append(Buffer(name, _nbytes(v), first[name], last))
    peak = plan(buffers, target.ddr_align_bytes)
    for b in buffers:
        v = in_ddr[b.key]
        tensors[b.key] = {"addr": weights_bytes + b.offset, "shape": list(static_shape(v)), "dtype": v.dtype,
                          "nbytes": b.size, "region": "activation"}
    return {
        "tensors": tensors,
        "weights_bytes": weights_bytes,
        "activation_peak_bytes": peak,
        "activation_no_reuse_bytes": sum(align(b.size, target.ddr_align_bytes) for b in buffers),
        "total_bytes": weights_bytes + peak,
    }


def _diff_attrs(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in new.items():
        if k not in base or base[k] != v:
            out[k] = list(v) if isinstance(v, tuple) else v
    return out


def _cost(ln: Lowered, shape: tuple[int, ...]) -> float:
    if ln.kernel is None:
        return elementwise_cost(ln.node, shape)
    return float(ln.kernel.hint("cost", ln.node, shape))


def _group_instrs(gi: int, g: GroupPlan, target: Target, instrs: list[dict[str, Any]]) -> None:
    values = {v.name: v for v in g.inputs}
    for ln in g.nodes:
        values[ln.node.outputs[0].name] = ln.node.outputs[0]
    n_group = static_shape(g.nodes[0].node.outputs[0])[0]
    first_use: dict[str, int] = {}
    for j, ln in enumerate(g.nodes):
        for v in ln.node.inputs:
            if v is not None and not v.is_constant:
                first_use.setdefault(v.name, j)
    loads_at: dict[int, list[Value]] = {}
    for v in g.inputs:
        loads_at.setdefault(first_use[v.name], []).append(v)
    for c in g.consts:
        instrs.append({"op": "load", "g": gi, "t": -1, "tensor": c.name, "lmem": g.alloc[c.name][0],
                       "n": None, "h": None, "const": True, "bytes": _nbytes(c),
                       "lane_bytes": constant_lane_bytes(target, static_shape(c), c.dtype)})

    def tile_shape(v: Value, t: Any) -> list[int]:
        lo, hi = t.rows[v.name]
        n = (t.n[1] - t.n[0]) if static_shape(v)[0] == n_group else static_shape(v)[0]
        return [n, static_shape(v)[1], hi - lo, static_shape(v)[3]]

    def buf(name: str, ti: int) -> str:
        """The allocation a tile uses for a tensor (ping-pong buffers alternate by tile)."""
        return name + "#1" if g.double and ti % 2 and name + "#1" in g.alloc else name

    def emit_load(v: Value, ti: int) -> None:
        t = g.tiles[ti]
        if v.name not in t.rows or t.rows[v.name][0] >= t.rows[v.name][1]:
            return
        shp = tile_shape(v, t)
        nr = list(t.n) if static_shape(v)[0] == n_group else [0, static_shape(v)[0]]
        b = buf(v.name, ti)
        instrs.append({"op": "load", "g": gi, "t": ti, "tensor": v.name, "buf": b,
                       "lmem": g.alloc[b][0], "n": nr, "h": list(t.rows[v.name]),
                       "bytes": math.prod(shp) * itemsize(v.dtype),
                       "lane_bytes": activation_lane_bytes(target, shp, v.dtype)})

    if g.double:
        for v in g.inputs:
            emit_load(v, 0)
    for ti, t in enumerate(g.tiles):
        if g.double and ti + 1 < len(g.tiles):
            for v in g.inputs:  # prefetch the next tile into the other buffer
                emit_load(v, ti + 1)
        for j, ln in enumerate(g.nodes):
            if not g.double:
                for v in loads_at.get(j, []):
                    emit_load(v, ti)
            node = ln.node
            r = t.computed.get(node.name)
            out = node.outputs[0]
            if r is not None:
                needs = t.needs[node.name]
                ins: list[dict[str, Any] | None] = []
                for i, v in enumerate(node.inputs):
                    if v is None:
                        ins.append(None)
                    elif v.is_constant:
                        ins.append(_const_view(ln, i, v, r, t.n, n_group, g.alloc[v.name][0]))
                    else:
                        nd = needs[i]
                        assert nd is not None
                        tlo = t.rows[v.name][0]
                        ins.append({"tensor": v.name, "buf": buf(v.name, ti),
                                    "lmem": g.alloc[buf(v.name, ti)][0],
                                    "shape": tile_shape(v, t),
                                    "h": [nd[1][0] - tlo, nd[1][1] - tlo]})
                attrs: dict[str, Any] = {}
                if ln.kernel is not None and ln.kernel.tile_attrs_fn is not None:
                    full = ln.kernel.hint(
                        "tile_attrs", node, r[0], r[1], [x[0] if x else None for x in needs],
                        [x[1] if x else None for x in needs])
                    attrs = _diff_attrs(node.attrs, full)
                oshape = tile_shape(out, t)
                instrs.append({"op": "compute", "g": gi, "t": ti, "node": node.name, "ins": ins,
                               "out": {"tensor": out.name, "buf": buf(out.name, ti),
                                       "lmem": g.alloc[buf(out.name, ti)][0], "shape": oshape},
                               "attrs": attrs, "flops": _cost(ln, tuple(oshape)),
                               "lane_bytes": activation_lane_bytes(target, oshape, out.dtype),
                               "eff": _efficiency(target, oshape, out.dtype)})
            s = t.stores.get(out.name)
            if s is not None:
                shp = tile_shape(out, t)
                nr = list(t.n) if static_shape(out)[0] == n_group else [0, static_shape(out)[0]]
                instrs.append({"op": "store", "g": gi, "t": ti, "tensor": out.name,
                               "buf": buf(out.name, ti), "lmem": g.alloc[buf(out.name, ti)][0],
                               "tile_shape": shp,
                               "tile_h0": t.rows[out.name][0], "n": nr, "h": list(s),
                               "bytes": shp[0] * shp[1] * (s[1] - s[0]) * shp[3] * itemsize(out.dtype)})


def _const_view(ln: Lowered, i: int, v: Value, r: tuple[int, int], n: tuple[int, int],
                n_group: int, addr: int) -> dict[str, Any]:
    """A constant input of a tile: resident whole in local memory, but an operand shaped like
    the activations (N, C, H, W) is read at the tile's rows and batch items."""
    d: dict[str, Any] = {"tensor": v.name, "lmem": addr, "shape": list(static_shape(v)), "h": None,
                         "n": None, "const": True}
    if len(static_shape(v)) != 4:
        return d
    hv = static_shape(v)[2]
    lo, hi = row_fn(ln, i, v)(r[0], r[1])
    if (lo, hi) != (0, hv):
        d["h"] = [min(max(lo, 0), hv), max(min(hi, hv), 0)]
    if static_shape(v)[0] == n_group and n_group > 1 and tuple(n) != (0, n_group):
        d["n"] = list(n)
    return d


def _stream_instrs(sp: StreamPlan, target: Target, instrs: list[dict[str, Any]]) -> None:
    """Per chunk of output channels: load its weight slices; per row tile: load the input
    rows, compute, store the chunk's rows."""
    ln = sp.ln
    node = ln.node
    out = node.outputs[0]
    oshape = static_shape(out)
    for c in sp.chunks:
        const_in: dict[int, dict[str, Any]] = {}
        for i, v in enumerate(node.inputs):
            if v is None or not v.is_constant:
                continue
            sl = sp.const_slice(i, c)
            shp = sliced_shape(static_shape(v), sl)
            addr = sp.alloc[v.name][0]
            instrs.append({"op": "load", "t": -1, "tensor": v.name, "buf": v.name, "lmem": addr,
                           "n": None, "h": None, "sel": list(sl) if sl else None, "const": True,
                           "bytes": math.prod(shp) * itemsize(v.dtype),
                           "lane_bytes": constant_lane_bytes(target, shp, v.dtype)})
            const_in[i] = {"tensor": v.name, "buf": v.name, "lmem": addr, "shape": list(shp),
                           "h": None, "n": None, "const": True}
        for ti, t in enumerate(sp.tiles):
            nn = t.n[1] - t.n[0]
            ins: list[dict[str, Any] | None] = []
            for i, v in enumerate(node.inputs):
                if v is None:
                    ins.append(None)
                    continue
                if i in const_in:
                    ins.append(const_in[i])
                    continue
                shp0 = static_shape(v)
                nd = t.needs[i]
                assert nd is not None
                sl = sp.const_slice(i, c)
                cr = [sl[1], sl[2]] if sl is not None and sl[0] == 1 else None
                tshape = [nn if shp0[0] == oshape[0] else shp0[0],
                          (cr[1] - cr[0]) if cr else shp0[1], nd[1][1] - nd[1][0], shp0[3]]
                addr = sp.alloc[v.name][0]
                instrs.append({"op": "load", "t": ti, "tensor": v.name, "buf": v.name, "lmem": addr,
                               "n": list(t.n) if shp0[0] == oshape[0] else [0, shp0[0]],
                               "h": list(nd[1]), "c": cr,
                               "bytes": math.prod(tshape) * itemsize(v.dtype),
                               "lane_bytes": activation_lane_bytes(target, tshape, v.dtype)})
                ins.append({"tensor": v.name, "buf": v.name, "lmem": addr, "shape": tshape,
                            "h": None})
            attrs: dict[str, Any] = {}
            if ln.kernel is not None and ln.kernel.tile_attrs_fn is not None:
                full = ln.kernel.hint("tile_attrs", node, t.rows[0], t.rows[1],
                                               [x[0] if x else None for x in t.needs],
                                               [x[1] if x else None for x in t.needs])
                attrs = _diff_attrs(node.attrs, full)
            ot = [nn, c[1] - c[0], t.rows[1] - t.rows[0], oshape[3]]
            addr = sp.alloc[out.name][0]
            instrs.append({"op": "compute", "t": ti, "node": node.name, "ins": ins,
                           "out": {"tensor": out.name, "buf": out.name, "lmem": addr, "shape": ot},
                           "attrs": attrs, "flops": _cost(ln, tuple(ot)),
                           "lane_bytes": activation_lane_bytes(target, ot, out.dtype),
                           "eff": _efficiency(target, ot, out.dtype)})
            instrs.append({"op": "store", "t": ti, "tensor": out.name, "buf": out.name, "lmem": addr,
                           "tile_shape": ot, "tile_h0": t.rows[0], "n": list(t.n),
                           "h": list(t.rows), "c": list(c),
                           "bytes": math.prod(ot) * itemsize(out.dtype)})


def _efficiency(target: Target, shape: list[int] | tuple[int, ...], dtype: str) -> float:
    """Fraction of the lanes' EUs a tile of this shape keeps busy (channels over lanes, H*W
    over the EU width)."""
    if len(shape) != 4:
        return 1.0
    n, c, h, w = shape
    lanes = target.lanes
    eu = target.eu_elems(dtype)
    c_eff = c / (-(-c // lanes) * lanes)
    hw = h * w
    hw_eff = hw / align(hw, eu) if hw else 1.0
    return max(c_eff * hw_eff, 1e-3)


def compile(  # noqa: A001 - the public name DESIGN.md gives it
    graph: Graph,
    target: str | Target | None = "bm1684",
    *,
    kernels: KernelRegistry | None = None,
    placement: Placement | None = None,
) -> Program:
    """Compile ``graph`` for ``target`` (a preset name or a Target) into a runnable Program."""
    if not isinstance(graph, Graph):
        raise SimulatorError(f"compile() takes an opbridge Graph, got {type(graph).__name__}",
                             hint="load or convert the model first: ob.load / ob.convert")
    tgt = resolve_target(target)
    _check_static(graph)
    lowered = lower(graph, kernels=kernels, placement=placement)
    units = form_groups(lowered, tgt, {v.name for v in graph.outputs})
    ddr = _ddr_plan(graph, units, tgt)
    instrs: list[dict[str, Any]] = []
    meta: list[dict[str, Any]] = []
    for u in units:
        if isinstance(u, GroupPlan):
            gi = sum(1 for m in meta if m["kind"] == "group")
            start = len(instrs)
            _group_instrs(gi, u, tgt, instrs)
            meta.append({
                "kind": "group", "index": gi, "nodes": u.node_names, "n_per": u.n_per, "k": u.k,
                "tiles": len(u.tiles), "alloc": {k: list(v) for k, v in u.alloc.items()},
                "lmem_peak": u.lmem_peak, "redundancy": round(u.redundancy, 4),
                "double_buffered": u.double,
                "inputs": [v.name for v in u.inputs], "outputs": [v.name for v in u.outputs],
                "consts": [v.name for v in u.consts], "instrs": [start, len(instrs)],
            })
            continue
        if isinstance(u, StreamPlan):
            start = len(instrs)
            _stream_instrs(u, tgt, instrs)
            meta.append({"kind": "global", "nodes": [u.ln.node.name], "op": u.ln.node.op,
                         "streamed": True, "chunks": len(u.chunks), "row_tiles": len(u.tiles),
                         "tiles": len(u.chunks) * len(u.tiles),
                         "alloc": {k: list(v) for k, v in u.alloc.items()},
                         "lmem_peak": u.lmem_peak, "instrs": [start, len(instrs)]})
            continue
        ln = u
        node = ln.node
        kind = "host" if ln.placement == CPU else "global"
        in_bytes = sum(_nbytes(v) for v in node.inputs if v is not None)
        out_bytes = sum(_nbytes(v) for v in node.outputs)
        oshape = tuple(static_shape(node.outputs[0])) if node.outputs else ()
        start = len(instrs)
        instrs.append({"op": kind, "node": node.name, "streamed": bool(ln.local),
                       "bytes": in_bytes + out_bytes, "flops": _cost(ln, oshape),
                       "eff": _efficiency(tgt, oshape, node.outputs[0].dtype) if oshape else 1.0})
        meta.append({"kind": kind, "nodes": [node.name], "op": node.op, "streamed": bool(ln.local),
                     "instrs": [start, len(instrs)]})
    prog = Program(graph, tgt, meta, instrs, ddr)
    prog.kernels = kernels
    return prog
