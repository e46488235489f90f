"""The program's schema: every instruction kind and unit kind, and the DDR plan, as frozen
dataclasses with their strict JSON round trip (``docs/obprog.md``).

The compiler builds these, ``program.py`` writes and reads them in ``.obprog`` files, the
executor (``run.py``) and the cost model (``cost.py``) dispatch on their class. Reading is
strict: a missing, unknown or mistyped field is a ModelFormatError naming the instruction or
unit and the field.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Union

from ..errors import ModelFormatError

#: What to do with a program file this opbridge cannot use as it is.
RECOMPILE_HINT = "re-compile the model: opbridge compile MODEL -o OUT.obprog"

#: A half-open range [lo, hi) of rows, batch items, channels or instructions.
Range = tuple[int, int]


class _Record:
    """JSON round trip of a frozen dataclass: every field by name, read strictly."""

    #: the JSON key that says which class a document is (``op`` / ``kind``), and its value
    TAG_KEY: ClassVar[str] = ""
    TAG: ClassVar[str] = ""
    #: field names of format version 1, where they differ
    _V1_NAMES: ClassVar[dict[str, str]] = {"g": "group", "t": "tile"}

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

    def __getitem__(self, key: str) -> Any:
        """The dict spelling of format version 1 (``unit["tiles"]``, ``prog.ddr["total_bytes"]``),
        kept working for old scripts, with a warning; values come back as JSON values."""
        name = self._V1_NAMES.get(key, key)
        use = f"isinstance(x, {type(self).__name__})" if key == self.TAG_KEY else f".{name}"
        warnings.warn(f"opbridge programs are typed: use {use} instead of [{key!r}]",
                      DeprecationWarning, stacklevel=2)
        if key == self.TAG_KEY:
            return self._v1_tag()
        return _encode(getattr(self, name))

    def _v1_tag(self) -> str:
        return self.TAG


class _Unit(_Record):
    """Shared by the unit kinds: every unit names its nodes and its instruction range."""

    TAG_KEY = "kind"
    #: how the summaries (``__repr__``, the profile) count the unit: group, global or host
    CATEGORY: ClassVar[str] = ""
    nodes: tuple[str, ...]
    instrs: Range

    def _v1_tag(self) -> str:
        return self.CATEGORY


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


def read_tagged(table: Mapping[str, type[_Record]], key: str, doc: Any, where: str) -> Any:
    """Read a document whose ``key`` (``op`` / ``kind``) picks its class in ``table``."""
    tag = doc.get(key) if isinstance(doc, dict) else None
    cls = table.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise ModelFormatError(f"{where}: unknown {key} {tag!r} (expected one of {', '.join(table)})")
    return cls.from_json(doc, f"{where} ({tag})")


def read_list(doc: Any, where: str) -> list[Any]:
    if not isinstance(doc, list):
        raise _bad(where, "a list", doc)
    return doc
