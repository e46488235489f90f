"""The cost model: an estimated timeline of a Program on its target.

Three engines: GDMA (DDR <-> local memory), the TPU's compute lanes, and the host CPU.
A GDMA transfer costs a set-up latency plus its bytes over the DDR bandwidth; a compute
costs its FLOPs over the peak throughput scaled by how well the tile fills the lanes
(channels over lanes, H*W over the EU width); a global layer streams its tensors through
local memory and holds both engines for the longer of the two; a host op runs on the CPU.

Instructions issue in program order on their own engine, and start as soon as their engine
is free and their data is ready: a read waits for the last write of the bytes it reads, a
write for the last read and write of the bytes it overwrites (local memory tracked per
:data:`LMEM_CHUNK` bytes of a lane, DDR per :data:`DDR_CHUNK`). So the next tile's loads
overlap the current tile's computes exactly where the addresses allow it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..ir.io import atomic_write

if TYPE_CHECKING:
    from .program import Program

LMEM_CHUNK = 256
DDR_CHUNK = 4096
ENGINES = ("gdma", "tpu", "host")


@dataclass
class UnitProfile:
    """One unit of the program: a layer group, a global layer or a host-CPU op."""

    index: int
    kind: str
    ops: list[str]
    tiles: int
    lmem_bytes: int
    gdma_bytes: int
    flops: float
    est_ms: float
    start_ms: float
    end_ms: float
    bound: str


@dataclass
class Profile:
    """The estimate for the whole program (fields as DESIGN.md lists them)."""

    est_latency_ms: float
    gdma_bytes: int
    lmem_peak_bytes: int
    num_layer_groups: int
    num_tiles: int
    num_global_layers: int
    num_cpu_layers: int
    groups: list[UnitProfile]
    units: list[UnitProfile]
    flops: float
    ddr_peak_bytes: int
    ddr_no_reuse_bytes: int
    weights_bytes: int
    events: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("events")
        return d

    def write_trace(self, path: str | os.PathLike[str]) -> None:
        """Write the timeline in the Chrome trace-event format (one track per engine)."""
        meta = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": i + 1,
                 "args": {"name": e}} for i, e in enumerate(ENGINES)]
        meta.append({"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                     "args": {"name": "opbridge simulator"}})
        doc = {"traceEvents": meta + self.events, "displayTimeUnit": "ms"}

        def write(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f)

        atomic_write(path, write)


class _Tracker:
    """Last read / write end times of fixed-size chunks of one memory."""

    def __init__(self, size: int, chunk: int) -> None:
        self.chunk = chunk
        n = max(1, -(-size // chunk))
        self.write = np.zeros(n)
        self.read = np.zeros(n)

    def span(self, lo: int, hi: int) -> slice:
        return slice(lo // self.chunk, max(lo // self.chunk + 1, -(-hi // self.chunk)))

    def ready_read(self, s: slice) -> float:
        return float(self.write[s].max())

    def ready_write(self, s: slice) -> float:
        return float(max(self.write[s].max(), self.read[s].max()))


def profile(prog: Program) -> Profile:
    """Schedule the program's instructions on the target's engines; see the module doc."""
    t = prog.target
    bw = t.ddr_bandwidth_gbps * 1e9
    lat = t.gdma_latency_us * 1e-6
    tensors = prog.ddr["tensors"]
    lm = _Tracker(t.lmem_bytes_per_lane, LMEM_CHUNK)
    dd = _Tracker(int(prog.ddr["total_bytes"]), DDR_CHUNK)
    free = dict.fromkeys(ENGINES, 0.0)
    nodes = {n.name: n for n in prog.graph.nodes}
    events: list[dict[str, Any]] = []
    busy: list[dict[str, float]] = []
    span_of: list[tuple[float, float]] = []
    tid = {e: i + 1 for i, e in enumerate(ENGINES)}

    def ddr_span(name: str) -> slice:
        d = tensors[name]
        return dd.span(d["addr"], d["addr"] + d["nbytes"])

    def peak(dtype: str) -> float:
        return t.peak_flops(dtype)

    for ui, u in enumerate(prog.units):
        lo_i, hi_i = u["instrs"]
        ub = dict.fromkeys(ENGINES, 0.0)
        first, last = float("inf"), 0.0
        for ins in prog.instrs[lo_i:hi_i]:
            op = ins["op"]
            if op in ("load", "store"):
                eng = ["gdma"]
                dur = lat + ins["bytes"] / bw
                lane = ins.get("lane_bytes")
                if lane is None:
                    shp = ins["tile_shape"]
                    from .memory import activation_lane_bytes

                    lane = activation_lane_bytes(t, shp, tensors[ins["tensor"]]["dtype"])
                ls = lm.span(ins["lmem"], ins["lmem"] + lane)
                ds = ddr_span(ins["tensor"])
                if op == "load":
                    start = max(free["gdma"], dd.ready_read(ds), lm.ready_write(ls))
                    reads, writes = [(dd, ds)], [(lm, ls)]
                else:
                    start = max(free["gdma"], lm.ready_read(ls), dd.ready_write(ds))
                    reads, writes = [(lm, ls)], [(dd, ds)]
                name = f"{op} {ins['tensor']}"
            elif op == "compute":
                eng = ["tpu"]
                node = nodes[ins["node"]]
                dur = ins["flops"] / (peak(node.outputs[0].dtype) * ins["eff"])
                reads, writes = [], []
                for v, a in zip(node.inputs, ins["ins"]):
                    if a is None or v is None:
                        continue
                    from .memory import activation_lane_bytes, constant_lane_bytes

                    lb = (constant_lane_bytes(t, a["shape"], v.dtype) if a.get("const")
                          else activation_lane_bytes(t, a["shape"], v.dtype))
                    reads.append((lm, lm.span(a["lmem"], a["lmem"] + lb)))
                o = ins["out"]
                writes.append((lm, lm.span(o["lmem"], o["lmem"] + ins["lane_bytes"])))
                start = max([free["tpu"]] + [m.ready_read(s) for m, s in reads]
                            + [m.ready_write(s) for m, s in writes])
                name = f"{node.op} {node.name} tile {ins['t']}"
            else:
                node = nodes[ins["node"]]
                reads = [(dd, ddr_span(v.name)) for v in node.inputs if v is not None and v.name in tensors]
                writes = [(dd, ddr_span(v.name)) for v in node.outputs]
                if op == "host":
                    eng = ["host"]
                    dur = ins["flops"] / (t.host_gflops * 1e9) + ins["bytes"] / bw
                else:
                    eng = ["gdma", "tpu"]
                    dtype = node.outputs[0].dtype if node.outputs else "f32"
                    dur = lat + max(ins["bytes"] / bw, ins["flops"] / (peak(dtype) * ins["eff"]))
                start = max([free[e] for e in eng] + [m.ready_read(s) for m, s in reads]
                            + [m.ready_write(s) for m, s in writes])
                name = f"{node.op} {node.name}"
            end = start + dur
            for e in eng:
                free[e] = end
                ub[e] += dur
            for m, s in reads:
                m.read[s] = np.maximum(m.read[s], end)
            for m, s in writes:
                m.write[s] = end
            first, last = min(first, start), max(last, end)
            for e in eng:
                events.append({"name": name, "cat": op, "ph": "X", "pid": 1, "tid": tid[e],
                               "ts": start * 1e6, "dur": dur * 1e6, "args": {"unit": ui}})
        busy.append(ub)
        span_of.append((first if first != float("inf") else last, last))

    units: list[UnitProfile] = []
    for ui, u in enumerate(prog.units):
        lo_i, hi_i = u["instrs"]
        unit_instrs = prog.instrs[lo_i:hi_i]
        gbytes = sum(i["bytes"] for i in unit_instrs if i["op"] in ("load", "store", "global"))
        flops = sum(i.get("flops", 0.0) for i in unit_instrs)
        engines = busy[ui]
        if u["kind"] == "host":
            bound = "host"
        elif u["kind"] == "global" and u.get("streamed") and "alloc" in u:
            bound = "memory" if engines["gdma"] >= engines["tpu"] else "compute"
        elif u["kind"] == "global":
            dtype = nodes[u["nodes"][0]].outputs[0].dtype
            comp = flops / (peak(dtype) * unit_instrs[0]["eff"])
            bound = "memory" if unit_instrs[0]["bytes"] / bw >= comp else "compute"
        else:
            bound = "memory" if engines["gdma"] >= engines["tpu"] else "compute"
        t_start, t_end = span_of[ui]
        units.append(UnitProfile(
            index=ui, kind=u["kind"], ops=[nodes[n].op for n in u["nodes"]],
            tiles=u.get("tiles", 1), lmem_bytes=u.get("lmem_peak", 0), gdma_bytes=int(gbytes),
            flops=flops, est_ms=(t_end - t_start) * 1e3, start_ms=t_start * 1e3,
            end_ms=t_end * 1e3, bound=bound))
    total = max(free.values())
    groups = [x for x in units if x.kind == "group"]
    return Profile(
        est_latency_ms=total * 1e3,
        gdma_bytes=sum(x.gdma_bytes for x in units if x.kind != "host"),
        lmem_peak_bytes=max((x.lmem_bytes for x in units), default=0),
        num_layer_groups=len(groups),
        num_tiles=sum(x.tiles for x in groups),
        num_global_layers=sum(1 for x in units if x.kind == "global"),
        num_cpu_layers=sum(1 for x in units if x.kind == "host"),
        groups=groups,
        units=units,
        flops=sum(x.flops for x in units),
        ddr_peak_bytes=int(prog.ddr["activation_peak_bytes"]),
        ddr_no_reuse_bytes=int(prog.ddr["activation_no_reuse_bytes"]),
        weights_bytes=int(prog.ddr["weights_bytes"]),
        events=events,
    )
