"""The compiled program and its ``.obprog`` file (see ``docs/obprog.md``).

A Program is the graph (for its op definitions and weights), the target, the units (layer
groups, streamed layers, global layers, host-CPU ops) with their local-memory allocations,
the DDR plan and the instruction list, all typed by ``schema.py``. This module owns the file:
the format marker and version, the JSON document of a whole program, and the structural
checks of a loaded one.

The file is a safetensors file: the weights are its tensors, and the metadata holds
``format = "opbridge.obprog"``, ``format_version`` and two JSON documents, ``graph`` (as in
``.obir``) and ``program``. No pickle.
"""

from __future__ import annotations

import inspect
import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ModelFormatError, OpbridgeError, SimulatorError
from ..ir.graph import Graph, Value
from ..ir.io import (
    atomic_write,
    graph_from_json,
    graph_to_json,
    open_stored,
    read_json,
)
from ..ir.opdef import DEFAULT_OPS
from .memory import constant_lane_bytes, packs_4n, tile_lane_bytes
from .rows import row_layout
from .schema import (
    INSTRUCTIONS,
    RECOMPILE_HINT,
    UNITS,
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
    read_list,
    read_tagged,
)
from .target import COST_FIELDS, Target, itemsize

__all__ = [
    "FORMAT", "FORMAT_VERSION", "INSTRUCTIONS", "RECOMPILE_HINT", "UNITS", "Alloc", "Compute",
    "DdrPlan", "DdrTensor", "GlobalOp", "GlobalUnit", "GroupUnit", "HostOp", "HostUnit",
    "Instruction", "Load", "Operand", "Program", "Store", "StreamUnit", "Unit", "load_program",
]

FORMAT = "opbridge.obprog"
#: 2: typed instructions and units (``kind: "stream"`` units, ``lane_bytes`` on every
#: local-memory access); version 1 files are refused with a re-compile hint.
#: 3: optional fields for column tiles, shared (aliased) buffers and scratch buffers. A file
#: is written with the lowest version that can read it: 2 unless it uses one of them.
#: 4: the target's cost-model fields (:data:`~.target.COST_FIELDS`), written only where they
#: differ from the bm1684 defaults (a bm1684x program, a custom chip's).
FORMAT_VERSION = 4
#: The oldest version this opbridge reads (and writes, for programs that need no more).
BASE_VERSION = 2


# -- the program ------------------------------------------------------------------------


class Program:
    """A compiled program for a simulated target: run it, profile it, save it."""

    def __init__(
        self,
        graph: Graph,
        target: Target,
        units: list[Unit],
        instrs: list[Instruction],
        ddr: DdrPlan,
    ) -> None:
        self.graph = graph
        self.target = target
        self.units = units
        self.instrs = instrs
        self.ddr = ddr
        #: the kernel registry whose tile kernels run the computes (the default after loading)
        self.kernels: Any = None
        self._executor: Any = None

    # -- running -------------------------------------------------------------------------
    def run(self, feeds: Mapping[str, Any], *, keep_intermediates: bool = False,
            threads: int | None = None) -> dict[str, np.ndarray]:
        """Execute the instructions on ``feeds``; returns graph-output name -> array, in
        graph-output order. ``keep_intermediates`` adds every tensor that passes through DDR
        (tensors inside a layer group never leave local memory, so they are not there).
        ``threads``: BLAS threads for the run (default ``OPBRIDGE_NUM_THREADS``, else 1; 0
        leaves BLAS its own setting; see :mod:`opbridge.threads`)."""
        from ..threads import blas_threads
        from .run import Executor

        if self._executor is None:
            self._executor = Executor(self)
        with blas_threads(threads):
            return self._executor.run(feeds, keep_intermediates=keep_intermediates)

    def profile(self) -> Any:
        """The cost model's estimate: latency, DDR traffic, local-memory use, per group."""
        from .cost import profile

        return profile(self)

    # -- summary -------------------------------------------------------------------------
    @property
    def groups(self) -> list[GroupUnit]:
        return [u for u in self.units if isinstance(u, GroupUnit)]

    @property
    def num_tiles(self) -> int:
        return sum(u.tiles for u in self.groups)

    def __repr__(self) -> str:
        kinds = [u.CATEGORY for u in self.units]
        return (f"Program({self.graph.name!r}, target={self.target.name}, "
                f"{kinds.count('group')} layer groups, {self.num_tiles} tiles, "
                f"{kinds.count('global')} global layers, {kinds.count('host')} host ops, "
                f"{len(self.instrs)} instructions)")

    # -- files ---------------------------------------------------------------------------
    def target_json(self) -> dict[str, Any]:
        """The target's fields, without the cost-model fields that keep the bm1684 defaults
        (so a file that needs none of them stays readable by a version 2 or 3 reader)."""
        base = Target()
        return {k: v for k, v in self.target.to_dict().items()
                if k not in COST_FIELDS or v != getattr(base, k)}

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target_json(), "units": [u.to_json() for u in self.units],
                "ddr": self.ddr.to_json(), "instructions": [i.to_json() for i in self.instrs]}

    @classmethod
    def from_json(cls, doc: dict[str, Any], graph: Graph, where: str) -> Program:
        """The program of a ``program`` document, read strictly; errors name ``where``."""
        keys = {"target", "units", "ddr", "instructions"}
        if set(doc) != keys:
            odd = sorted(set(doc) ^ keys)[0]
            raise ModelFormatError(f"{where}: not a valid .obprog program: "
                                   f"{'missing' if odd in keys else 'unknown'} part '{odd}'")
        target = Target.from_dict(doc["target"], where=where)
        units = [read_tagged(UNITS, "kind", u, f"unit {i}")
                 for i, u in enumerate(read_list(doc["units"], "units"))]
        instrs = [read_tagged(INSTRUCTIONS, "op", d, f"instruction {i}")
                  for i, d in enumerate(read_list(doc["instructions"], "instructions"))]
        return cls(graph, target, units, instrs, DdrPlan.from_json(doc["ddr"], "the DDR plan"))

    def format_version(self) -> int:
        """The lowest ``.obprog`` version that can hold this program."""
        if any(k in COST_FIELDS for k in self.target_json()):
            return 4
        records: list[Any] = [*self.units, *self.instrs, self.ddr]
        return 3 if any(r.extended() for r in records) else BASE_VERSION

    def save(self, path: str | os.PathLike[str], *, extra: dict[str, str] | None = None,
             extra_tensors: dict[str, np.ndarray] | None = None) -> None:
        """Write the program as a ``.obprog`` file (documented in docs/obprog.md); ``extra``:
        more metadata entries (a dynamic program's symbolic graph), ``extra_tensors`` the
        tensors they read that the program's graph does not hold."""
        from safetensors.numpy import save_file

        tensors: dict[str, np.ndarray] = {}
        gdoc = graph_to_json(self.graph, tensors)
        for name, arr in (extra_tensors or {}).items():
            tensors.setdefault(name, arr)
        meta = {
            "format": FORMAT,
            "format_version": str(self.format_version()),
            "graph": json.dumps(gdoc, separators=(",", ":")),
            "program": json.dumps(self.to_json(), separators=(",", ":")),
            **(extra or {}),
        }
        atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=meta))


def load_program(path: str | os.PathLike[str]) -> Program:
    """Read a ``.obprog`` file written by :meth:`Program.save`."""
    meta, tensor = open_stored(path, ".obprog", FORMAT, FORMAT_VERSION,
                               "compile the model first: opbridge compile MODEL -o OUT.obprog")
    version = int(meta["format_version"])  # open_stored checked it is a number
    if version < 1:
        raise ModelFormatError(f"'{path}': format_version {version} is not a version opbridge writes",
                               hint=RECOMPILE_HINT)
    if version < BASE_VERSION:
        raise ModelFormatError(
            f"'{path}' has .obprog format version {version}: it was written by an older opbridge "
            f"(this one reads versions {BASE_VERSION} to {FORMAT_VERSION})", hint=RECOMPILE_HINT)
    gdoc = read_json(meta.get("graph", ""), f"'{path}': the graph JSON")
    pdoc = read_json(meta.get("program", ""), f"'{path}': the program JSON")
    try:
        graph = graph_from_json(gdoc, tensor, DEFAULT_OPS)
        prog = Program.from_json(pdoc, graph, f"'{path}'")
        _check_program(prog, f"'{path}'")
        if "dynamic" in meta:  # compiled with dynamic=True: the symbolic graph rides along
            from .dynamic import load_dynamic

            return load_dynamic(meta["dynamic"], prog, tensor, f"'{path}'")  # type: ignore[return-value]
    except OpbridgeError as err:
        msg = err.message if err.message.startswith(f"'{path}'") else f"'{path}': {err.message}"
        raise type(err)(msg, hint=err.hint) from None
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ModelFormatError(f"'{path}': not a valid .obprog program: {err!r}") from None
    return prog


def _check_program(prog: Program, where: str) -> None:
    """Structural checks of a loaded program, before anything is allocated."""
    values = prog.graph.values()  # walks the whole graph: once, not per instruction
    _check_ddr(prog, values, where)
    by_name = {n.name: n for n in prog.graph.nodes}
    nodes = set(by_name)
    tensors = prog.ddr.tensors
    # which constant (name, shape) each local address last received, as the executor tracks it
    const_at: dict[int, tuple[str, tuple[int, ...]]] = {}
    keywords: dict[Any, frozenset[str] | None] = {}
    for i, ins in enumerate(prog.instrs):
        if isinstance(ins, (Compute, GlobalOp, HostOp)) and ins.node not in nodes:
            raise ModelFormatError(f"{where}: instruction {i} names unknown node {ins.node!r}")
        if isinstance(ins, (Load, Store)) and ins.tensor not in tensors:
            raise ModelFormatError(f"{where}: instruction {i} names unknown tensor {ins.tensor!r}")
        if isinstance(ins, Load) and ins.const:
            const_at[ins.lmem] = (ins.tensor, _loaded_shape(ins, tensors[ins.tensor].shape,
                                                            f"{where}: instruction {i} ({ins.TAG})"))
        if isinstance(ins, Compute):
            node = by_name[ins.node]
            _check_operands(values, ins, node, f"{where}: instruction {i} ({ins.TAG})", const_at)
            _check_tile_attrs(prog, ins, node, f"{where}: instruction {i} ({ins.TAG})", keywords)
        _check_costs(ins, prog.target.lmem_bytes_per_lane, prog.target.lmem_align_bytes,
                     f"{where}: instruction {i} ({ins.TAG})")
        _check_layout(prog.target, values, ins, f"{where}: instruction {i} ({ins.TAG})")
    end = 0
    for i, u in enumerate(prog.units):
        unknown = [n for n in u.nodes if n not in nodes]
        if unknown or not u.nodes:
            raise ModelFormatError(f"{where}: unit {i} names unknown node {(unknown or [''])[0]!r}")
        lo, hi = u.instrs
        if lo != end or hi < lo or hi > len(prog.instrs):
            raise ModelFormatError(f"{where}: unit {i} covers instructions [{lo}, {hi}), "
                                   f"not the next ones from {end}")
        end = hi
    if end != len(prog.instrs):
        raise ModelFormatError(f"{where}: the units cover {end} of {len(prog.instrs)} instructions")


def _check_operands(values: Mapping[str, Value], ins: Compute, node: Any, where: str,
                    const_at: Mapping[int, tuple[str, tuple[int, ...]]]) -> None:
    """A compute's operands are its node's tensors, one per input slot, and each tile lies
    inside its tensor (its rows, batch items and columns inside the tile); a weight tile is
    what the last constant load at its address brought (``const_at``): what the kernels
    index by, so that an edited file is refused here rather than failing inside numpy."""
    if len(ins.ins) != len(node.inputs) or any((a is None) != (v is None) or (a is not None and a.tensor != v.name)
                                               for a, v in zip(ins.ins, node.inputs)):
        raise ModelFormatError(f"{where}: its operands {[a and a.tensor for a in ins.ins]} are not the "
                               f"inputs of node '{node.name}' {[v and v.name for v in node.inputs]}",
                               hint=RECOMPILE_HINT)
    if not node.outputs or ins.out.tensor != node.outputs[0].name:
        raise ModelFormatError(f"{where}: it writes '{ins.out.tensor}', not an output of node '{node.name}'",
                               hint=RECOMPILE_HINT)
    for a in (ins.out, *ins.ins):
        if a is None:
            continue
        full = values[a.tensor].shape
        if len(a.shape) == len(full):
            inside = all(isinstance(d, int) and isinstance(f, int) and min(1, f) <= d <= f
                         for d, f in zip(a.shape, full))
        else:  # the rank-4 tile of a lower-rank activation (a matmul's rows), never more elements
            inside = (len(a.shape) == 4 and len(full) < 4 and not a.const and all(d >= 1 for d in a.shape)
                      and all(isinstance(f, int) for f in full) and math.prod(a.shape) <= math.prod(full))
        spans = [(r, a.shape[axis]) for r, axis in ((a.n, 0), (a.h, 2), (a.w, 3))
                 if r is not None and len(a.shape) == 4]
        if not inside or any(not 0 <= lo < hi <= dim for (lo, hi), dim in spans):
            raise ModelFormatError(f"{where}: the tile {list(a.shape)} of '{a.tensor}' (n {a.n}, h {a.h}, "
                                   f"w {a.w}) does not lie inside the tensor {list(full)}", hint=RECOMPILE_HINT)
        if a.const and const_at.get(a.lmem) != (a.tensor, tuple(a.shape)):
            got = const_at.get(a.lmem)
            had = "nothing" if got is None else f"{list(got[1])} of '{got[0]}'"
            raise ModelFormatError(f"{where}: the weight tile {list(a.shape)} of '{a.tensor}' at local "
                                   f"address {a.lmem} is not what the program loaded there ({had})",
                                   hint=RECOMPILE_HINT)


def _loaded_shape(ins: Load, shape: tuple[int, ...] | list[int], where: str) -> tuple[int, ...]:
    """The shape a constant's load brings: the whole tensor, or its slice ``sel``."""
    out = list(shape)
    if ins.sel is not None:
        axis, lo, hi = ins.sel
        if not (0 <= axis < len(out) and 0 <= lo < hi <= out[axis]):
            raise ModelFormatError(f"{where}: the slice (axis {axis}, [{lo}, {hi})) of '{ins.tensor}' "
                                   f"does not lie inside the tensor {out}", hint=RECOMPILE_HINT)
        out[axis] = hi - lo
    return tuple(out)


def _check_tile_attrs(prog: Program, ins: Compute, node: Any, where: str,
                      keywords: dict[Any, frozenset[str] | None]) -> None:
    """The attributes a tile overrides are parameters of the node's op, with values of their
    type and range, or keywords the function that runs the node takes (``keywords`` caches
    them per function; None: it takes any)."""
    if not ins.attrs:
        return
    from .run import node_function  # the executor's choice of function, not a copy of it

    params = prog.graph.registry.get(node.op).params
    for name, value in ins.attrs.items():
        spec = params.get(name)
        if spec is not None:
            try:
                spec.convert(value, f"tile attribute of node '{node.name}' ({node.op})")
            except OpbridgeError as err:
                raise ModelFormatError(f"{where}: {err.message}", hint=RECOMPILE_HINT) from None
            continue
        fn = node_function(prog, node, len(node.outputs) == 1)[0]
        if fn not in keywords:
            keywords[fn] = _keywords(fn)
        known = keywords[fn]
        if known is not None and name not in known:
            raise ModelFormatError(
                f"{where}: unknown tile attribute '{name}': not a parameter of node '{node.name}' "
                f"({node.op}; it has {', '.join(params) or 'none'}) nor a keyword of its kernel",
                hint=RECOMPILE_HINT)


def _keywords(fn: Any) -> frozenset[str] | None:
    """The names ``fn`` takes by keyword (None: any, or it cannot tell)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return frozenset(n for n, p in sig.parameters.items() if p.kind in kinds)


def _check_costs(ins: Instruction, lane: int, align_bytes: int, where: str) -> None:
    """The figures the cost model divides by and the local ranges it tracks are sane."""
    if isinstance(ins, (Compute, GlobalOp, HostOp)) and not (ins.flops >= 0 and 0 < ins.eff <= 1):
        raise ModelFormatError(f"{where}: flops {ins.flops} / efficiency {ins.eff} out of range")
    if isinstance(ins, (Load, Store, GlobalOp, HostOp)) and ins.bytes < 0:
        raise ModelFormatError(f"{where}: negative byte count {ins.bytes}")
    local: list[Any] = [ins] if isinstance(ins, (Load, Store)) else []
    if isinstance(ins, Compute):
        local = [ins.out, *(a for a in ins.ins if a is not None)]
    for a in local:
        if a.lmem < 0 or a.lane_bytes < 0:
            raise ModelFormatError(f"{where}: local range [{a.lmem}, {a.lmem + a.lane_bytes}) of "
                                   f"'{a.tensor}' is negative")
        if a.lmem % align_bytes:
            raise ModelFormatError(f"{where}: local address {a.lmem} of '{a.tensor}' is not a multiple "
                                   f"of the stored target's lmem_align_bytes ({align_bytes})",
                                   hint=_TARGET_HINT)
        if a.lmem + a.lane_bytes > lane:
            raise ModelFormatError(f"{where}: local range [{a.lmem}, {a.lmem + a.lane_bytes}) of "
                                   f"'{a.tensor}' lies outside the lane's {lane} bytes (the stored "
                                   f"target's lmem_bytes_per_lane)", hint=_TARGET_HINT)


_TARGET_HINT = ("the program's memory plan was made for another target than the one stored with "
                "it: recompile the model for the target you want (opbridge compile --target/"
                "--target-json/--lmem-kib)")


def _check_layout(target: Target, values: Mapping[str, Value], ins: Instruction, where: str) -> None:
    """Each tile the plan places takes, under the stored target's layout (``lanes``, ``eu_bytes``,
    ``int8_batch_pack``), no more bytes per lane than the plan reserves for it."""
    tiles: list[tuple[str, tuple[int, ...], int, bool]] = []
    if isinstance(ins, Compute):
        tiles = [(a.tensor, tuple(a.shape), a.lane_bytes, a.const) for a in (ins.out, *ins.ins) if a is not None]
    elif isinstance(ins, Store):
        tiles = [(ins.tensor, tuple(ins.tile_shape), ins.lane_bytes, False)]
    for name, shape, stored, const in tiles:
        v = values.get(name)
        # a tile is rank 4, but a volume's (rank 5) keeps its rank for its kernel
        if v is None or len(shape) != 4 and not const and not len(shape) == len(v.shape) == 5:
            raise ModelFormatError(f"{where}: '{name}' is not a tile of a graph tensor")
        need = (constant_lane_bytes(target, shape, v.dtype) if const
                else tile_lane_bytes(target, shape, v.dtype, row_layout(v)))
        if need > stored:
            fields = f"lanes = {target.lanes}, eu_bytes = {target.eu_bytes}"
            if packs_4n(target, v.dtype):
                fields += f", int8_batch_pack = {target.int8_batch_pack}"
            raise ModelFormatError(f"{where}: under the stored target's {fields}, the tile "
                                   f"{v.dtype}{list(shape)} of '{name}' takes {need} bytes per lane; "
                                   f"its plan reserves {stored}", hint=_TARGET_HINT)


def _check_ddr(prog: Program, values: Mapping[str, Value], where: str) -> None:
    """The DDR plan: every tensor is the graph's own and lies inside the plan."""
    tensors = prog.ddr.tensors
    total = prog.ddr.total_bytes
    if total < 0 or total > (1 << 36):
        raise ModelFormatError(f"{where}: DDR size {total!r} is not a sane byte count")
    align_bytes = max(int(prog.target.ddr_align_bytes), 1)
    for name, t in tensors.items():
        if t.addr < 0 or t.nbytes < 0 or t.addr + t.nbytes > total:
            raise SimulatorError(f"{where}: tensor '{name}' lies outside the DDR plan",
                                 hint=RECOMPILE_HINT)
        if t.region == "scratch":  # a global layer's scratch buffer: bytes, no graph value
            if t.dtype != "u8" or list(t.shape) != [t.nbytes]:
                raise ModelFormatError(f"{where}: scratch buffer '{name}' is not {t.nbytes} u8 bytes")
            continue
        if t.alias_of is not None and (t.alias_of not in tensors or tensors[t.alias_of].addr != t.addr):
            raise ModelFormatError(f"{where}: '{name}' shares the bytes of '{t.alias_of}', "
                                   "which the DDR plan does not place at the same address")
        if t.addr % align_bytes:
            raise ModelFormatError(f"{where}: tensor '{name}' at DDR address {t.addr} is not a multiple "
                                   f"of the stored target's ddr_align_bytes ({align_bytes})",
                                   hint=_TARGET_HINT)
        # the plan must describe the graph's own tensor: same shape, dtype and size
        v = values.get(name)
        if v is None:
            raise ModelFormatError(f"{where}: the DDR plan places '{name}', which the graph lacks")
        if (list(t.shape) != list(v.shape) or t.dtype != v.dtype
                or t.nbytes != int(np.prod(v.shape, dtype=np.int64)) * itemsize(v.dtype)):
            raise ModelFormatError(
                f"{where}: the DDR plan gives '{name}' as {t.dtype}{list(t.shape)} "
                f"({t.nbytes} bytes); the graph has {v.dtype}{list(v.shape)}")
    # with reuse a plan is never larger than every tensor laid end to end
    bound = sum(t.nbytes + align_bytes for t in tensors.values())
    if total > bound:
        raise ModelFormatError(f"{where}: DDR size {total} exceeds what its {len(tensors)} tensors "
                               f"can need ({bound} bytes)")
