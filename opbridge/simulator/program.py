"""The compiled program, its schema, and its ``.obprog`` file (see ``docs/obprog.md``).

A Program is the graph (for its op definitions and weights), the target, the units (layer
groups, streamed layers, global layers, host-CPU ops) with their local-memory allocations,
the DDR plan and the instruction list. Every instruction kind and every unit kind is a frozen
dataclass defined here, and this module alone turns them into JSON and back: the compiler
writes them, the executor (``run.py``) and the cost model (``cost.py``) dispatch on their
class. Reading is strict: a missing, unknown or mistyped field is a ModelFormatError naming
the file and the instruction or unit.

The file is a safetensors file: the weights are its tensors, and the metadata holds
``format = "opbridge.obprog"``, ``format_version`` and two JSON documents, ``graph`` (as in
``.obir``) and ``program``. No pickle.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import types
import typing
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Union

import numpy as np

from ..errors import ModelFormatError, OpbridgeError, SimulatorError
from ..ir.graph import Graph
from ..ir.io import (
    atomic_write,
    graph_from_json,
    graph_to_json,
    open_stored,
    read_json,
)
from ..ir.opdef import DEFAULT_OPS
from .target import Target, itemsize

FORMAT = "opbridge.obprog"
#: 2: typed instructions and units (``kind: "stream"`` units, ``lane_bytes`` on every
#: local-memory access); version 1 files are refused with a re-compile hint.
FORMAT_VERSION = 2
RECOMPILE_HINT = "re-compile the model: opbridge compile MODEL -o OUT.obprog"

#: A half-open range [lo, hi) of rows, batch items, channels or instructions.
Range = tuple[int, int]


class _Record:
    """JSON round trip of a frozen dataclass: every field by name, read strictly."""

    #: the JSON key that says which class a document is (``op`` / ``kind``), and its value
    TAG_KEY: ClassVar[str] = ""
    TAG: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {self.TAG_KEY: self.TAG} if self.TAG_KEY else {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            doc[f.name] = _encode(getattr(self, f.name))
        return doc

    @classmethod
    def from_json(cls, doc: Any, where: str) -> Any:
        if not isinstance(doc, dict):
            raise _bad(where, "a JSON object", doc)
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        allowed = set(names) | ({cls.TAG_KEY} if cls.TAG_KEY else set())
        unknown = sorted(str(k) for k in doc if k not in allowed)
        if unknown:
            raise ModelFormatError(f"{where}: unknown field '{unknown[0]}'")
        missing = [n for n in names if n not in doc]
        if missing:
            raise ModelFormatError(f"{where}: missing field '{missing[0]}'")
        hints = _hints(cls)
        return cls(**{n: _decode(hints[n], doc[n], f"{where} field '{n}'") for n in names})


class _Unit(_Record):
    """Shared by the unit kinds: every unit names its nodes and its instruction range."""

    TAG_KEY = "kind"
    #: how the summaries (``__repr__``, the profile) count the unit: group, global or host
    CATEGORY: ClassVar[str] = ""
    nodes: tuple[str, ...]
    instrs: Range

    def __getitem__(self, key: str) -> Any:
        """The version-1 dict spelling ``unit["tiles"]``, kept working for old scripts."""
        warnings.warn(f"program units are typed: use unit.{key} instead of unit[{key!r}]",
                      DeprecationWarning, stacklevel=2)
        if key == "kind":
            return self.CATEGORY
        return _encode(getattr(self, key))


# -- instructions -----------------------------------------------------------------------


@dataclass(frozen=True)
class Operand(_Record):
    """A tile operand of a compute in local memory: the buffer ``buf`` of ``tensor`` at
    per-lane address ``lmem``, of ``shape``, taking ``lane_bytes`` in every lane; ``h`` / ``n``
    take rows / batch items of it (relative to the tile), ``const`` for a resident constant."""

    tensor: str
    buf: str
    lmem: int
    shape: tuple[int, ...]
    lane_bytes: int
    h: Range | None
    n: Range | None
    const: bool


@dataclass(frozen=True)
class Load(_Record):
    """GDMA from DDR to local memory: batch items ``n``, channels ``c`` and rows ``h`` of
    ``tensor`` (all of it when ``n`` is None; ``sel = (axis, lo, hi)`` slices a constant)."""

    TAG_KEY = "op"
    TAG = "load"
    group: int | None
    tile: int
    tensor: str
    buf: str
    lmem: int
    n: Range | None
    h: Range | None
    c: Range | None
    sel: tuple[int, int, int] | None
    const: bool
    bytes: int
    lane_bytes: int


@dataclass(frozen=True)
class Store(_Record):
    """GDMA from local memory to DDR: rows ``h`` of the tile at ``lmem`` (shape
    ``tile_shape``, first row ``tile_h0``), batch items ``n``, channels ``c`` if given."""

    TAG_KEY = "op"
    TAG = "store"
    group: int | None
    tile: int
    tensor: str
    buf: str
    lmem: int
    tile_shape: tuple[int, ...]
    tile_h0: int
    n: Range
    h: Range
    c: Range | None
    bytes: int
    lane_bytes: int


@dataclass(frozen=True)
class Compute(_Record):
    """Run ``node`` on one tile; ``attrs`` overrides the node's attributes for that tile (a
    convolution's pads at the tile edges), as JSON values."""

    TAG_KEY = "op"
    TAG = "compute"
    group: int | None
    tile: int
    node: str
    ins: tuple[Operand | None, ...]
    out: Operand
    attrs: dict[str, Any]
    flops: float
    eff: float


@dataclass(frozen=True)
class GlobalOp(_Record):
    """Run ``node`` on whole tensors in DDR, streaming them through local memory."""

    TAG_KEY = "op"
    TAG = "global"
    node: str
    bytes: int
    flops: float
    eff: float


@dataclass(frozen=True)
class HostOp(_Record):
    """Run ``node`` on the host CPU, on whole tensors in DDR."""

    TAG_KEY = "op"
    TAG = "host"
    node: str
    bytes: int
    flops: float
    eff: float


Instruction = Load | Store | Compute | GlobalOp | HostOp
INSTRUCTIONS: dict[str, type[_Record]] = {c.TAG: c for c in (Load, Store, Compute, GlobalOp, HostOp)}


# -- units ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alloc:
    """A local buffer: per-lane address and bytes, live from node ``first`` to ``last``;
    in JSON the list ``[addr, size, first, last]``."""

    addr: int
    size: int
    first: int
    last: int


@dataclass(frozen=True)
class GroupUnit(_Unit):
    """A layer group: ``n_per`` batch items and ``k`` row cuts per tile."""

    TAG = "group"
    CATEGORY = "group"
    index: int
    nodes: tuple[str, ...]
    n_per: int
    k: int
    tiles: int
    alloc: dict[str, Alloc]
    lmem_peak: int
    redundancy: float
    double_buffered: bool
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    consts: tuple[str, ...]
    instrs: Range


@dataclass(frozen=True)
class StreamUnit(_Unit):
    """A layer that fits no tile, streamed in ``chunks`` of output channels x ``row_tiles``."""

    TAG = "stream"
    CATEGORY = "global"
    nodes: tuple[str, ...]
    op: str
    chunks: int
    row_tiles: int
    tiles: int
    alloc: dict[str, Alloc]
    lmem_peak: int
    instrs: Range


@dataclass(frozen=True)
class GlobalUnit(_Unit):
    """A global layer on whole tensors; ``fits_no_tile`` for a local layer too big for a tile."""

    TAG = "global"
    CATEGORY = "global"
    nodes: tuple[str, ...]
    op: str
    fits_no_tile: bool
    instrs: Range


@dataclass(frozen=True)
class HostUnit(_Unit):
    """An op placed on the host CPU."""

    TAG = "host"
    CATEGORY = "host"
    nodes: tuple[str, ...]
    op: str
    instrs: Range


Unit = GroupUnit | StreamUnit | GlobalUnit | HostUnit
UNITS: dict[str, type[_Record]] = {c.TAG: c for c in (GroupUnit, StreamUnit, GlobalUnit, HostUnit)}


# -- the DDR plan -----------------------------------------------------------------------


@dataclass(frozen=True)
class DdrTensor(_Record):
    """One tensor's place in DDR; ``region`` is ``"weight"`` or ``"activation"``."""

    addr: int
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    region: str


@dataclass(frozen=True)
class DdrPlan(_Record):
    """One byte address space: weights first, then activations with lifetime-based reuse."""

    tensors: dict[str, DdrTensor]
    weights_bytes: int
    activation_peak_bytes: int
    activation_no_reuse_bytes: int
    total_bytes: int


# -- JSON helpers -----------------------------------------------------------------------


def _encode(x: Any) -> Any:
    if isinstance(x, Alloc):
        return [x.addr, x.size, x.first, x.last]
    if isinstance(x, _Record):
        return x.to_json()
    if isinstance(x, (tuple, list)):
        return [_encode(a) for a in x]
    if isinstance(x, dict):
        return {k: _encode(v) for k, v in x.items()}
    return x


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _bad(where: str, want: str, got: Any) -> ModelFormatError:
    text = repr(got)
    return ModelFormatError(f"{where}: expected {want}, got {text[:60]}{'...' if len(text) > 60 else ''}")


def _decode(tp: Any, v: Any, where: str) -> Any:
    """``v`` (decoded JSON) as a value of type ``tp``, or a ModelFormatError at ``where``."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return v
    if origin in (Union, types.UnionType):
        if v is None:
            if type(None) in typing.get_args(tp):
                return None
            raise _bad(where, "a value", v)
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return _decode(inner, v, where)
    if tp is bool:
        if not isinstance(v, bool):
            raise _bad(where, "true or false", v)
        return v
    if tp is int:
        if not isinstance(v, int) or isinstance(v, bool):
            raise _bad(where, "an integer", v)
        return v
    if tp is float:
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            raise _bad(where, "a finite number", v)
        return float(v)
    if tp is str:
        if not isinstance(v, str):
            raise _bad(where, "a string", v)
        return v
    if origin is tuple:
        return _decode_tuple(typing.get_args(tp), v, where)
    if origin is dict:
        if not isinstance(v, dict):
            raise _bad(where, "a JSON object", v)
        vt = typing.get_args(tp)[1]
        return {k: _decode(vt, x, f"{where}['{k}']") for k, x in v.items()}
    if tp is Alloc:
        vals = _decode_tuple((int, int, int, int), v, where)
        return Alloc(*vals)
    if isinstance(tp, type) and issubclass(tp, _Record):
        return tp.from_json(v, where)
    raise TypeError(f"no JSON reader for {tp!r}")  # a schema bug, not a file problem


def _decode_tuple(args: tuple[Any, ...], v: Any, where: str) -> tuple[Any, ...]:
    if not isinstance(v, list):
        raise _bad(where, "a list", v)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_decode(args[0], x, f"{where}[{i}]") for i, x in enumerate(v))
    if len(v) != len(args):
        raise _bad(where, f"a list of {len(args)}", v)
    return tuple(_decode(a, x, f"{where}[{i}]") for i, (a, x) in enumerate(zip(args, v)))


def _tagged(table: Mapping[str, type[_Record]], key: str, doc: Any, where: str) -> Any:
    """Read a document whose ``key`` (``op`` / ``kind``) picks its class in ``table``."""
    tag = doc.get(key) if isinstance(doc, dict) else None
    cls = table.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise ModelFormatError(f"{where}: unknown {key} {tag!r} (expected one of {', '.join(table)})")
    return cls.from_json(doc, f"{where} ({tag})")


def _list(doc: Any, where: str) -> list[Any]:
    if not isinstance(doc, list):
        raise _bad(where, "a list", doc)
    return doc


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
    def run(self, feeds: Mapping[str, Any], *, keep_intermediates: bool = False
            ) -> dict[str, np.ndarray]:
        """Execute the instructions on ``feeds``; returns graph-output name -> array, in
        graph-output order. ``keep_intermediates`` adds every tensor that passes through DDR
        (tensors inside a layer group never leave local memory, so they are not there)."""
        from .run import Executor

        if self._executor is None:
            self._executor = Executor(self)
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
    def to_json(self) -> dict[str, Any]:
        return {"target": self.target.to_dict(), "units": [u.to_json() for u in self.units],
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
        units = [_tagged(UNITS, "kind", u, f"unit {i}")
                 for i, u in enumerate(_list(doc["units"], "units"))]
        instrs = [_tagged(INSTRUCTIONS, "op", d, f"instruction {i}")
                  for i, d in enumerate(_list(doc["instructions"], "instructions"))]
        return cls(graph, target, units, instrs, DdrPlan.from_json(doc["ddr"], "the DDR plan"))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the program as a ``.obprog`` file (documented in docs/obprog.md)."""
        from safetensors.numpy import save_file

        tensors: dict[str, np.ndarray] = {}
        gdoc = graph_to_json(self.graph, tensors)
        meta = {
            "format": FORMAT,
            "format_version": str(FORMAT_VERSION),
            "graph": json.dumps(gdoc, separators=(",", ":")),
            "program": json.dumps(self.to_json(), separators=(",", ":")),
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
    if version < FORMAT_VERSION:
        raise ModelFormatError(
            f"'{path}' has .obprog format version {version}: it was written by an older opbridge "
            f"(this one reads version {FORMAT_VERSION})", hint=RECOMPILE_HINT)
    gdoc = read_json(meta.get("graph", ""), f"'{path}': the graph JSON")
    pdoc = read_json(meta.get("program", ""), f"'{path}': the program JSON")
    try:
        graph = graph_from_json(gdoc, tensor, DEFAULT_OPS)
        prog = Program.from_json(pdoc, graph, f"'{path}'")
        _check_program(prog, f"'{path}'")
    except OpbridgeError as err:
        msg = err.message if err.message.startswith(f"'{path}'") else f"'{path}': {err.message}"
        raise type(err)(msg, hint=err.hint) from None
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ModelFormatError(f"'{path}': not a valid .obprog program: {err!r}") from None
    return prog


def _check_program(prog: Program, where: str) -> None:
    """Structural checks of a loaded program, before anything is allocated."""
    _check_ddr(prog, where)
    nodes = {n.name for n in prog.graph.nodes}
    tensors = prog.ddr.tensors
    for i, ins in enumerate(prog.instrs):
        if isinstance(ins, (Compute, GlobalOp, HostOp)) and ins.node not in nodes:
            raise ModelFormatError(f"{where}: instruction {i} names unknown node {ins.node!r}")
        if isinstance(ins, (Load, Store)) and ins.tensor not in tensors:
            raise ModelFormatError(f"{where}: instruction {i} names unknown tensor {ins.tensor!r}")
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


def _check_ddr(prog: Program, where: str) -> None:
    """The DDR plan: every tensor is the graph's own and lies inside the plan."""
    tensors = prog.ddr.tensors
    total = prog.ddr.total_bytes
    if total < 0 or total > (1 << 36):
        raise ModelFormatError(f"{where}: DDR size {total!r} is not a sane byte count")
    values = prog.graph.values()
    align_bytes = max(int(prog.target.ddr_align_bytes), 1)
    for name, t in tensors.items():
        if t.addr < 0 or t.nbytes < 0 or t.addr + t.nbytes > total:
            raise SimulatorError(f"{where}: tensor '{name}' lies outside the DDR plan")
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
