"""The cost model: an estimated timeline of a Program on its target.

Three engines: GDMA (DDR <-> local memory), the TPU's compute lanes, and the host CPU.
A GDMA transfer costs a set-up latency plus its bytes over the DDR bandwidth; a compute
costs its FLOPs over the peak throughput scaled by how well the tile fills the lanes
(channels over lanes, H*W over the EU width); a global layer streams its tensors through
local memory and holds both engines for the longer of the two; a host op runs on the CPU.

Instructions issue in program order on their own engine, and start as soon as their engine
is free and their data is ready: a read waits for the last write of the bytes it reads, a
write for the last read and write of the bytes it overwrites (local memory tracked per
the target's ``lmem_align_bytes`` of a lane, DDR per ``ddr_align_bytes``, the alignments
their buffers are allocated at). A load may also take an
earlier idle stretch of GDMA, left while an earlier transfer waited for its data, if it fits
there: the chip's compiler moves a load to an earlier time step wherever GDMA has slack and
its local memory is free then (TPU-MLIR ``TimeStepMethod::memory_aware_timestep_assignment``).
So a layer's weights and inputs load while the layers before it compute, in a one-tile group
as in a tiled one, and the next tile's loads overlap the current tile's computes, exactly
where the addresses allow it.
"""

from __future__ import annotations

import bisect
import json
import math
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..ir.io import atomic_write
from .memory import gdma_bytes, packs_4n
from .schema import (
    Compute,
    GlobalOp,
    GlobalUnit,
    GroupUnit,
    HostOp,
    HostUnit,
    Instruction,
    Load,
    Store,
    StreamUnit,
    Unit,
)

if TYPE_CHECKING:
    from ..ir.graph import Graph, Node, Value
    from .program import Program
    from .target import Target

ENGINES = ("gdma", "tpu", "host")

#: ops the lanes run as matrix products (rows or output features over the lanes, the reduction
#: over the EUs)
MATMUL_OPS = frozenset({"MatMul", "FusedMatMul", "Gemm", "MatMulInteger", "ScaledDotProductAttention"})
#: ops the lanes run as convolutions (output channels over lanes, output pixels over the EUs)
CONV_OPS = frozenset({"Conv", "FusedConv", "ConvTranspose", "ConvInteger", "DeformConv"})
#: convolutions that sample their input before the multiply-adds (a deformable convolution reads
#: its columns bilinearly at learnt offsets): the multiply-adds of the convolution of the same
#: shape run as that convolution's, the rest of their FLOPs (the sampling) on the vector path
SAMPLED_CONV_OPS = frozenset({"DeformConv"})
#: integer matrix ops whose i32 accumulator the chip rescales on the way out of the same
#: instruction (the fix8b convolution's bias, per-channel multiplier and shift, and ReLU)
INTEGER_MAC_OPS = frozenset({"ConvInteger", "MatMulInteger"})
#: reductions: their work is spread over the lanes as their input is
REDUCE_OPS = frozenset({"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL2",
                        "ReduceL1", "ReduceProd", "ReduceLogSum", "ReduceLogSumExp"})
#: pools over every pixel: like a reduction, spread over the lanes as their input is
GLOBAL_POOL_OPS = frozenset({"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
#: activations an int8 convolution instruction applies to its requantized output
EPILOGUE_ACTIVATIONS = frozenset({"Max", "Relu", "Clip"})


def fused_epilogues(nodes: list[Node], outputs: set[str]) -> dict[str, str]:
    """The ops the chip runs inside an integer convolution or matrix product, as the name of
    that op by the name of each: the bias Add on its i32 accumulator, the Requantize of it and
    a ReLU (``Max`` with the zero point, ``Relu``, ``Clip``) of the 8-bit result, each the only
    reader of the value before it (not a graph output) with constants for its other operands.
    TPU-MLIR lowers exactly this chain into one instruction: BM1684's fix8b convolution takes
    the bias, the right shift and ``if_relu`` (``BM1684::dl_nodechip_conv_forward_parallel_fix8b``),
    BM1684X's quantized convolution the per-channel multiplier, shift and ReLU
    (``lib/Dialect/Tpu/Interfaces/BM1684X/Conv2D.cpp``); the i32 accumulator never leaves the
    lanes. The program keeps them as ops of their own (their tiles in local memory, their
    global layers), but they take no time of their own."""
    readers: dict[str, list[Node]] = {}
    for n in nodes:
        for v in n.inputs:
            if v is not None:
                readers.setdefault(v.name, []).append(n)
    host: dict[str, str] = {}  # value name -> the integer op whose instruction produces it
    fused: dict[str, str] = {}
    for n in nodes:
        if n.op in INTEGER_MAC_OPS:
            host[n.outputs[0].name] = n.name
            continue
        x = n.inputs[0] if n.inputs else None
        if x is None or x.name not in host or x.name in outputs or len(readers.get(x.name, [])) != 1:
            continue
        others_const = all(v is None or v.is_constant for v in n.inputs[1:])
        stage = ("acc" if x.dtype == "i32" else "q")
        ok = (n.op == "Add" and stage == "acc" and others_const and len(n.inputs) == 2
              or n.op == "Requantize" and stage == "acc"
              or n.op in EPILOGUE_ACTIVATIONS and stage == "q" and others_const)
        if ok:
            fused[n.name] = host[n.outputs[0].name] = host[x.name]
    return fused


@dataclass(frozen=True)
class GraphFacts:
    """What the cost scheduler needs to know of the whole graph, whichever of its units a
    program holds: its nodes by name, and the fused epilogues (telling one needs every reader
    of a value and the graph's outputs, not only the nodes of the units scheduled). The
    compile's estimates schedule many small programs of one graph; they share one of these,
    so an estimate costs what its units do (:func:`graph_facts`)."""

    graph: Graph
    nodes: dict[str, Node]
    #: epilogue op -> the integer op whose instruction runs it (see fused_epilogues)
    fused: dict[str, str]
    #: integer op -> the value its fused epilogue ends in (what its instruction writes)
    epilogue_out: dict[str, Value]


def graph_facts(graph: Graph) -> GraphFacts:
    """The :class:`GraphFacts` of ``graph``: one pass over its nodes."""
    nodes = {n.name: n for n in graph.nodes}
    fused = fused_epilogues(graph.nodes, {v.name for v in graph.outputs})
    return GraphFacts(graph=graph, nodes=nodes, fused=fused,
                      epilogue_out={fused[n]: nodes[n].outputs[0] for n in fused})


def op_family(node: Node) -> str:
    """How an op uses the lanes: "conv" (a spatial kernel: every tap reads a shifted window
    of the input), "conv1x1" (a 1x1 kernel: a channel reduction on aligned planes),
    "depthwise", "matmul" or "vector" (element-wise, pooling, normalisation, data movement:
    one element per EU per cycle)."""
    if node.op in CONV_OPS:
        w = node.inputs[1] if len(node.inputs) > 1 else None
        if int(node.attrs.get("group", 1)) > 1 and w is not None and w.shape[1] == 1:
            return "depthwise"
        if w is not None and all(int(d) == 1 for d in w.shape[2:]):
            return "conv1x1"
        return "conv"
    if node.op in MATMUL_OPS:
        return "matmul"
    return "vector"


def static_dims(v: Any) -> tuple[int, ...]:
    """A value's shape as integers (the program is compiled for static shapes)."""
    return tuple(int(d) for d in v.shape)


def reduced_axes(node: Node) -> tuple[int, ...]:
    """The input axes a reduction folds (every axis when ``axes`` is empty, none when
    ``noop_with_empty_axes`` is set too), normalised to the input's rank."""
    rank = len(node.inputs[0].shape)
    axes = tuple(sorted({int(a) % rank for a in node.attrs.get("axes", ())})) if rank else ()
    if not axes and not node.attrs.get("noop_with_empty_axes", 0):
        return tuple(range(rank))
    return axes


def _read_layout(node: Node, shape: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """The shape whose layout sets how well a compute of ``node`` producing ``shape`` fills
    the lanes, and that layout's tensor rank. A reduction works where its input lies, not where
    its smaller output does: a tile of a last-axis reduction reads its rows' whole last axis,
    a global one (a whole-tensor mean to one element) the whole input, channels over the lanes."""
    out_rank = len(node.outputs[0].shape)
    if node.op in GLOBAL_POOL_OPS and node.inputs and node.inputs[0] is not None:
        x = static_dims(node.inputs[0])
        return (*shape[:2], *x[2:]), len(x)  # a tile keeps its batch, reads every pixel
    if node.op not in REDUCE_OPS or not node.inputs or node.inputs[0] is None:
        return shape, out_rank
    x = static_dims(node.inputs[0])
    if reduced_axes(node) == (len(x) - 1,) and node.attrs.get("keepdims", 1):
        return (*shape[:-1], x[-1]), out_rank
    return x, len(x)


def _fill(used: int, unit: int) -> float:
    """The fraction of ``ceil(used / unit) * unit`` slots ``used`` items fill."""
    return used / (-(-used // unit) * unit) if used > 0 else 1.0


def compute_seconds(target: Target, node: Node, shape: tuple[int, ...], flops: float,
                    fam: str | None = None) -> float:
    """Time the lanes take for ``flops`` of ``node`` producing a tile of ``shape``: the peak of
    the op family (multiply-add peak for conv / matmul, twice the vector rate for depthwise,
    the vector rate otherwise), times the family's efficiency, times how much of the lanes,
    the EUs, the input-channel parallelism and (int8 on a 4N chip) the batch packing the tile
    fills. ``fam``: cost them as that family (default: the node's; a sampled convolution's
    FLOPs past its multiply-adds then take the vector path)."""
    if fam is None and node.op in SAMPLED_CONV_OPS and len(node.inputs) > 1 and node.inputs[1] is not None:
        from .kernels.sample import deform_conv_macs

        macs = min(flops, deform_conv_macs(node, shape))
        return (compute_seconds(target, node, shape, macs, op_family(node))
                + compute_seconds(target, node, shape, flops - macs, "vector"))
    fam = fam or op_family(node)
    x = node.inputs[0] if node.inputs and node.inputs[0] is not None else node.outputs[0]
    mac = fam in ("conv", "conv1x1", "matmul")
    dtype = x.dtype if mac else node.outputs[0].dtype
    # a 4N tile's EU row holds eu_bytes / pack pixels, each a pack of 8-bit batch items (the
    # pixels are aligned to that in local memory too: memory.activation_lane_bytes)
    eu = (max(1, target.eu_bytes // target.int8_batch_pack) if packs_4n(target, dtype)
          else target.eu_elems(dtype))
    shape, layout_rank = _read_layout(node, shape)
    rows = math.prod(shape[:-1]) if shape else 1
    if fam in ("conv", "conv1x1", "depthwise") and len(shape) >= 3:
        n, c, spatial = shape[0], shape[1], math.prod(shape[2:])
        fill = _fill(c, target.lanes) * _fill(spatial, eu)
    elif fam == "matmul" and len(shape) >= 2:
        # rows or output features over the lanes (whichever fills them), the reduction over
        # the EUs
        n, k = 1, int(x.shape[-1]) if x.shape else 1
        fill = max(_fill(rows, target.lanes), _fill(shape[-1], target.lanes)) * _fill(k, eu)
    elif layout_rank <= 3 and shape:
        # the row layout of a rank-1..3 tensor (a group sees it as (batch, 1, rows, features)):
        # rows over the lanes, features along the EUs
        n = 1
        fill = _fill(rows, target.lanes) * _fill(shape[-1], eu)
    elif len(shape) >= 3:
        n = shape[0]
        fill = _fill(shape[1], target.lanes) * _fill(math.prod(shape[2:]), eu)
    else:
        n = 1
        fill = _fill(max(1, math.prod(shape)), target.lanes * eu)
    if fam in ("conv", "conv1x1") and len(node.inputs) > 1 and node.inputs[1] is not None:
        w = [int(d) for d in node.inputs[1].shape]
        icp = target.ic_parallel(x.dtype)
        # fewer input channels than one step reduces: the kernel taps are folded into the
        # channels (a first layer's 3 channels x 7x7 taps fill the step as 147 channels)
        fill *= _fill(w[1] * (math.prod(w[2:]) if w[1] < icp else 1), icp)
    if packs_4n(target, dtype):
        fill *= _fill(n, target.int8_batch_pack)
    if mac:
        rate = target.peak_flops(dtype)
    else:
        rate = target.vector_ops(dtype) * (2.0 if fam == "depthwise" else 1.0)
    return flops / (rate * target.family_efficiency(fam, dtype) * max(fill, 1e-3))


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
    #: DDR bytes not allocated because a tensor shares another's (reshapes, in-place layers)
    ddr_shared_bytes: int = 0
    #: per-lane local bytes not allocated because in-place layers share their input's buffer
    lmem_shared_bytes: int = 0
    #: hand-overs between the TPU and the host (a host layer after TPU work, TPU work after a
    #: host layer): each is a synchronisation the device driver makes
    num_host_syncs: int = 0
    #: time the host layers take on the host engine, which the TPU waits for
    host_ms: float = 0.0
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
        """The chunks of bytes [lo, hi): at least one (an empty range at the very end of the
        memory counts as its last chunk)."""
        first = min(lo // self.chunk, len(self.write) - 1)
        return slice(first, max(first + 1, -(-hi // self.chunk)))

    def ready_read(self, s: slice) -> float:
        return float(self.write[s].max())

    def ready_write(self, s: slice) -> float:
        return float(max(self.write[s].max(), self.read[s].max()))


#: (memory tracker, chunk span) pairs an instruction reads or writes
Access = list[tuple[_Tracker, slice]]


@dataclass
class _Step:
    """One instruction as the scheduler sees it: its engines, duration and memory accesses."""

    engines: tuple[str, ...]
    dur: float
    reads: Access
    writes: Access
    name: str


class _Scheduler:
    """Issues instructions in program order on their engines (see the module doc)."""

    def __init__(self, prog: Program, facts: GraphFacts) -> None:
        t = prog.target
        self.target = t
        self.bw = t.ddr_bandwidth_gbps * 1e9
        self.lat = t.gdma_latency_us * 1e-6
        self.tensors = prog.ddr.tensors
        # tracked in chunks no two buffers share: local memory at the allocator's alignment,
        # DDR at the largest chunk every tensor starts on (its alignment at least; larger
        # chunks keep a big DDR's tracker small)
        self.lm = _Tracker(t.lmem_bytes_per_lane, t.lmem_align_bytes)
        ddr_chunk = math.gcd(prog.ddr.total_bytes, *(d.addr for d in prog.ddr.tensors.values()))
        self.dd = _Tracker(prog.ddr.total_bytes, max(ddr_chunk, t.ddr_align_bytes))
        self.nodes = facts.nodes
        self.fused = facts.fused
        self.epilogue_out = facts.epilogue_out
        self.events: list[dict[str, Any]] = []
        self.tid = {e: i + 1 for i, e in enumerate(ENGINES)}
        #: no instruction of the current unit starts before this (the unit's launch)
        self.floor = t.launch_us * 1e-6
        self.free = dict.fromkeys(ENGINES, self.floor)
        #: idle stretches of GDMA before ``free["gdma"]`` in the current unit, as (start, end),
        #: earliest first: where a later load may still go
        self.gaps: list[tuple[float, float]] = []
        #: the current unit's first loads may go into the previous unit's idle GDMA time
        #: (:func:`group_overlap`)
        self.carry = False

    def gap_start(self, ready: float, dur: float) -> float | None:
        """The start of the first idle stretch of GDMA where a transfer ready at ``ready``
        and lasting ``dur`` fits (the stretch is split around it), or None."""
        # the gaps are disjoint and in time order: one ending before ready + dur cannot fit
        first = bisect.bisect_left(self.gaps, ready + dur, key=lambda g: g[1])
        for i in range(first, len(self.gaps)):
            lo, hi = self.gaps[i]
            start = max(lo, ready)
            if start + dur <= hi:
                self.gaps[i:i + 1] = [(a, b) for a, b in ((lo, start), (start + dur, hi)) if b > a]
                return start
        return None

    def ddr_span(self, name: str) -> slice:
        d = self.tensors[name]
        return self.dd.span(d.addr, d.addr + d.nbytes)

    def step(self, ins: Instruction) -> _Step:
        match ins:
            case Load():
                return _Step(("gdma",), self.lat + ins.bytes / self.bw, [(self.dd, self.ddr_span(ins.tensor))],
                             [(self.lm, self.lm.span(ins.lmem, ins.lmem + ins.lane_bytes))],
                             f"load {ins.tensor}")
            case Store():
                return _Step(("gdma",), self.lat + ins.bytes / self.bw,
                             [(self.lm, self.lm.span(ins.lmem, ins.lmem + ins.lane_bytes))],
                             [(self.dd, self.ddr_span(ins.tensor))], f"store {ins.tensor}")
            case Compute():
                return self._compute(ins)
            case GlobalOp() | HostOp():
                return self._whole(ins)
        raise TypeError(f"not an instruction: {ins!r}")

    def _compute(self, ins: Compute) -> _Step:
        node = self.nodes[ins.node]
        t = self.target
        dur = (0.0 if node.name in self.fused
               else t.tiu_issue_us * 1e-6 + compute_seconds(t, node, ins.out.shape, ins.flops))
        reads: Access = [(self.lm, self.lm.span(a.lmem, a.lmem + a.lane_bytes))
                         for v, a in zip(node.inputs, ins.ins) if a is not None and v is not None]
        o = ins.out
        writes: Access = [(self.lm, self.lm.span(o.lmem, o.lmem + o.lane_bytes))]
        return _Step(("tpu",), dur, reads, writes, f"{node.op} {node.name} tile {ins.tile}")

    def _whole(self, ins: GlobalOp | HostOp) -> _Step:
        """A global layer holds GDMA and the lanes for the longer of its traffic and compute;
        a host op runs on the CPU and reads and writes DDR."""
        node = self.nodes[ins.node]
        reads: Access = [(self.dd, self.ddr_span(v.name)) for v in node.inputs
                         if v is not None and v.name in self.tensors]
        writes: Access = [(self.dd, self.ddr_span(v.name)) for v in node.outputs
                          if v.name in self.tensors]  # a tensor sized by the run is in host memory
        if isinstance(ins, HostOp):
            dur = ins.flops / (self.target.host_gflops * 1e9) + ins.bytes / self.bw
            return _Step(("host",), dur, reads, writes, f"{node.op} {node.name}")
        dur = 0.0 if node.name in self.fused else self.lat + max(self.global_bytes(ins) / self.bw,
                                                                 self.compute_time(ins))
        return _Step(("gdma", "tpu"), dur, reads, writes, f"{node.op} {node.name}")

    def global_bytes(self, ins: GlobalOp) -> int:
        """DDR bytes a global layer moves: the program's count, but an integer op with a fused
        epilogue writes the epilogue's 8-bit result, not its i32 accumulator, and an epilogue
        op moves nothing of its own."""
        node = self.nodes[ins.node]
        if node.name in self.fused:
            return 0
        end = self.epilogue_out.get(node.name)
        if end is None:
            return ins.bytes
        acc = node.outputs[0]
        return (ins.bytes - gdma_bytes(self.target, static_dims(acc), acc.dtype)
                + gdma_bytes(self.target, static_dims(end), end.dtype))

    def compute_time(self, ins: GlobalOp) -> float:
        node = self.nodes[ins.node]
        if not node.outputs or ins.alias or node.name in self.fused:
            return 0.0
        shape = tuple(int(d) for d in node.outputs[0].shape)
        return compute_seconds(self.target, node, shape, ins.flops)

    def issue(self, ins: Instruction, ui: int, busy: dict[str, float]) -> tuple[float, float]:
        """Schedule one instruction of unit ``ui``: it starts when its engines are free and
        its data is ready, or a load in an earlier idle stretch of GDMA where it fits after
        its data is ready; returns its (start, end) and adds its time to ``busy``."""
        st = self.step(ins)
        data = max([0.0] + [m.ready_read(s) for m, s in st.reads] + [m.ready_write(s) for m, s in st.writes])
        ready = max(self.floor, data)
        early = self.carry and isinstance(ins, Load) and ins.tile <= 0
        start = self.gap_start(data if early else ready, st.dur) if isinstance(ins, Load) else None
        if start is None:
            start = max([ready] + [self.free[e] for e in st.engines])
            if "gdma" in st.engines and start > self.free["gdma"]:
                self.gaps.append((self.free["gdma"], start))
            for e in st.engines:
                self.free[e] = start + st.dur
        end = start + st.dur
        for e in st.engines:
            busy[e] += st.dur
        for m, s in st.reads:
            m.read[s] = np.maximum(m.read[s], end)
        for m, s in st.writes:
            m.write[s] = end
        for e in st.engines:
            self.events.append({"name": st.name, "cat": ins.TAG, "ph": "X", "pid": 1, "tid": self.tid[e],
                                "ts": start * 1e6, "dur": st.dur * 1e6, "args": {"unit": ui}})
        return start, end

    def unit(self, prog: Program, ui: int, u: Unit) -> UnitProfile:
        """Schedule a unit's instructions; its profile."""
        lo_i, hi_i = u.instrs
        busy = dict.fromkeys(ENGINES, 0.0)
        first, last = float("inf"), 0.0
        unit_instrs = prog.instrs[lo_i:hi_i]
        if not (isinstance(u, GlobalUnit) and all(isinstance(i, GlobalOp) and i.alias for i in unit_instrs)):
            # units run one after another: a launch waits for every engine, then syncs
            self.floor = max(self.free.values()) + self.target.sync_us * 1e-6
            self.carry = ui > 0 and group_overlap(prog.units[ui - 1], u, self.fused)
            if not self.carry:
                self.gaps = []
            # the previous unit's idle GDMA stretches stay open to a carried load, the sync not
            self.free["gdma"] = max(self.free["gdma"], self.floor)
        for ins in issue_order(unit_instrs):
            start, end = self.issue(ins, ui, busy)
            first, last = min(first, start), max(last, end)
        t_start = first if first != float("inf") else last
        gbytes = sum(self.global_bytes(i) if isinstance(i, GlobalOp) else i.bytes
                     for i in unit_instrs if isinstance(i, (Load, Store, GlobalOp)))
        flops = sum(i.flops for i in unit_instrs if isinstance(i, (Compute, GlobalOp, HostOp)))
        return UnitProfile(
            index=ui, kind=u.CATEGORY, ops=[self.nodes[n].op for n in u.nodes],
            tiles=u.tiles if isinstance(u, (GroupUnit, StreamUnit)) else 1,
            lmem_bytes=u.lmem_peak if isinstance(u, (GroupUnit, StreamUnit)) else 0,
            gdma_bytes=int(gbytes), flops=flops, est_ms=(last - t_start) * 1e3,
            start_ms=t_start * 1e3, end_ms=last * 1e3, bound=self.bound(u, unit_instrs, busy))

    def bound(self, u: Unit, unit_instrs: list[Instruction], busy: dict[str, float]) -> str:
        """Which engine limits a unit: the host, DDR traffic ("gdma") or the lanes ("compute")."""
        if isinstance(u, HostUnit):
            return "host"
        if isinstance(u, GlobalUnit):
            (ins,) = unit_instrs
            assert isinstance(ins, GlobalOp)
            return "gdma" if self.global_bytes(ins) / self.bw >= self.compute_time(ins) else "compute"
        return "gdma" if busy["gdma"] >= busy["tpu"] else "compute"


def group_overlap(prev: Unit, u: Unit, fused: dict[str, str]) -> bool:
    """Whether layer group ``u``'s first loads (its weights and its first tile's inputs) may
    run in the idle GDMA time of ``prev``, the unit before it, where its local memory is free
    then and their data is ready: TPU-MLIR's ``GroupDataMoveOverlapPass`` moves a group's
    first-stage loads into the previous group's time steps with GDMA slack whose buffers
    allow it (``direct_group_overlap_schd`` in ``lib/Dialect/Tpu/Transforms/LayerGroup/
    GroupOverlap.cpp``), but only between two groups of more than one op each (an epilogue
    fused into a convolution is no op of its own), and not into a group of at most two
    batch x row steps (``up_overlap_depth``: with its software pipeline, what the next group
    loads might not be stored yet)."""
    if not (isinstance(prev, GroupUnit) and isinstance(u, GroupUnit)):
        return False
    ops = [sum(1 for n in x.nodes if n not in fused) for x in (prev, u)]
    return min(ops) > 1 and prev.tiles // prev.kw > 2


def issue_order(instrs: list[Instruction]) -> list[Instruction]:
    """The order GDMA and the lanes take a unit's instructions in: a layer group's weights
    (loaded once, before its tiles, in the program) are fetched one time step ahead, while
    the compute before the first one that reads them runs, so the lanes start on the first
    layer while the later layers' weights arrive, as a layer group's time steps overlap them;
    and ahead of the next tile's prefetched inputs, which are needed later than they are."""
    pending: dict[str, Load] = {}
    order: list[Instruction] = []
    last_compute = 0  # where in ``order`` the previous compute sits
    for ins in instrs:
        if isinstance(ins, Load) and ins.const and ins.tile == -1:
            pending[ins.tensor] = ins
            continue
        if isinstance(ins, Compute):
            loads = [pending.pop(a.tensor) for a in ins.ins if a is not None and a.tensor in pending]
            at = last_compute
            while at > 0 and isinstance(order[at - 1], Load) and order[at - 1].tile > ins.tile:
                at -= 1
            order[at:at] = loads
            last_compute = len(order)
        order.append(ins)
    return order + list(pending.values())


def profile(prog: Program, facts: GraphFacts | None = None) -> Profile:
    """Schedule the program's instructions on the target's engines; see the module doc.
    ``facts``: :func:`graph_facts` of the program's graph, when the caller schedules several
    programs of one graph (computed here without)."""
    if facts is None:
        facts = graph_facts(prog.graph)
    elif facts.graph is not prog.graph:
        raise ValueError(f"profile: the graph facts are of graph '{facts.graph.name}', "
                         f"not of the program's graph '{prog.graph.name}'")
    sched = _Scheduler(prog, facts)
    units = [sched.unit(prog, ui, u) for ui, u in enumerate(prog.units)]
    groups = [x for x in units if x.kind == "group"]
    return Profile(
        est_latency_ms=max(sched.free.values()) * 1e3,
        gdma_bytes=sum(x.gdma_bytes for x in units if x.kind != "host"),
        lmem_peak_bytes=max((x.lmem_bytes for x in units), default=0),
        num_layer_groups=len(groups),
        num_tiles=sum(x.tiles for x in groups),
        num_global_layers=sum(1 for x in units if x.kind == "global"),
        num_cpu_layers=sum(1 for x in units if x.kind == "host"),
        groups=groups,
        units=units,
        flops=sum(x.flops for x in units),
        ddr_peak_bytes=prog.ddr.activation_peak_bytes,
        ddr_no_reuse_bytes=prog.ddr.activation_no_reuse_bytes,
        weights_bytes=prog.ddr.weights_bytes,
        ddr_shared_bytes=sum(t.nbytes for t in prog.ddr.tensors.values() if t.alias_of is not None),
        lmem_shared_bytes=sum(u.lmem_saved for u in prog.groups),
        num_host_syncs=sum(1 for a, b in zip(units, units[1:]) if (a.kind == "host") != (b.kind == "host")),
        host_ms=sum(x.est_ms for x in units if x.kind == "host"),
        events=sched.events,
    )
