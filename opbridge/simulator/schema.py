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
from collections.abc import Callable, Mapping
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
        """Every field by name, but a field of format version 3 only when it is not at its
        default, so a program that uses none of them is written as version 2 wrote it."""
        doc: dict[str, Any] = {self.TAG_KEY: self.TAG} if self.TAG_KEY else {}
        defaults = _defaults(type(self))
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.name in defaults and value == defaults[f.name]:
                continue
            doc[f.name] = _encode(value)
        return doc

    def extended(self) -> bool:
        """Whether this record (or one inside it) uses a field of format version 3."""
        defaults = _defaults(type(self))
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.name in defaults and value != defaults[f.name]:
                return True
            inner = value.values() if isinstance(value, dict) else (
                value if isinstance(value, tuple) else (value,))
            if any(isinstance(x, _Record) and x.extended() for x in inner):
                return True
        return False

    @classmethod
    def from_json(cls, doc: Any, where: str) -> Any:
        """Read a document of this class strictly; errors are ModelFormatErrors at ``where``."""
        try:
            return cls._read(doc)
        except _Bad as err:
            raise ModelFormatError(f"{where}{''.join(reversed(err.path))}: {err.what}") from None

    @classmethod
    def _read(cls, doc: Any) -> Any:
        if not isinstance(doc, dict):
            raise _Bad.expected("a JSON object", doc)
        fields = _fields(cls)
        for k in doc:
            if k not in fields and k != cls.TAG_KEY:
                raise _Bad(f"unknown field '{k}'")
        values = {}
        defaults = _defaults(cls)
        for name, read in fields.items():
            if name not in doc and name in defaults:
                values[name] = defaults[name]
                continue
            if name not in doc:
                raise _Bad(f"missing field '{name}'")
            try:
                values[name] = read(doc[name])
            except _Bad as err:
                err.path.append(f" field '{name}'")
                raise
        return cls(**values)

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
    #: columns of it the node reads, relative to the tile (a layer group cut along W); of the
    #: output, the columns the node writes (one chunk of a streamed weight's output features)
    w: Range | None = None


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
    #: columns of ``tensor`` (all when None)
    w: Range | None = None


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
    #: columns stored (all when None) and the tile's first column
    w: Range | None = None
    tile_w0: int = 0


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
    #: the tile's scratch buffer: per-lane local range [lo, hi) (bmcompiler's local buffer)
    scratch: Range | None = None


@dataclass(frozen=True)
class GlobalOp(_Record):
    """Run ``node`` on whole tensors in DDR, streaming them through local memory; ``alias``:
    its output shares its input's DDR bytes (a reshape: nothing to run); ``scratch`` names
    its scratch buffer in the DDR plan."""

    TAG_KEY = "op"
    TAG = "global"
    node: str
    bytes: int
    flops: float
    eff: float
    alias: bool = False
    scratch: str | None = None


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
    #: column cuts per tile (1: whole rows)
    kw: int = 1
    #: tensor -> the tensor whose local buffer it shares (an in-place layer's output)
    aliases: dict[str, str] = dataclasses.field(default_factory=dict)
    #: per-lane bytes the shared buffers save
    lmem_saved: int = 0


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
    #: the tensor whose bytes it shares (a reshape's or an in-place layer's output)
    alias_of: str | None = None


@dataclass(frozen=True)
class DdrPlan(_Record):
    """One byte address space: weights first, then activations with lifetime-based reuse;
    ``region: "scratch"`` entries are global layers' scratch buffers (``shape`` in bytes)."""

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


class _Bad(Exception):
    """A field that does not fit the schema; ``path`` grows (innermost first) on the way out."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.path: list[str] = []

    @classmethod
    def expected(cls, want: str, got: Any) -> _Bad:
        text = repr(got)
        return cls(f"expected {want}, got {text[:60]}{'...' if len(text) > 60 else ''}")


_FIELDS: dict[type, dict[str, Callable[[Any], Any]]] = {}
_DEFAULTS: dict[type, dict[str, Any]] = {}


def _defaults(cls: type) -> dict[str, Any]:
    """The fields of format version 3 (those with a default) and their defaults."""
    if cls not in _DEFAULTS:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
        _DEFAULTS[cls] = out
    return _DEFAULTS[cls]


def _fields(cls: type) -> dict[str, Callable[[Any], Any]]:
    """Field name -> its reader, of a record class (built once per class)."""
    if cls not in _FIELDS:
        hints = typing.get_type_hints(cls)
        _FIELDS[cls] = {f.name: _reader(hints[f.name]) for f in dataclasses.fields(cls)}
    return _FIELDS[cls]


def _scalar(ok: Callable[[Any], bool], want: str, conv: Callable[[Any], Any] = lambda v: v
            ) -> Callable[[Any], Any]:
    def read(v: Any) -> Any:
        if not ok(v):
            raise _Bad.expected(want, v)
        return conv(v)

    return read


_SCALARS: dict[Any, Callable[[Any], Any]] = {
    int: _scalar(lambda v: type(v) is int, "an integer"),  # bool is not an integer here
    str: _scalar(lambda v: isinstance(v, str), "a string"),
    bool: _scalar(lambda v: isinstance(v, bool), "true or false"),
    float: _scalar(lambda v: type(v) in (int, float) and math.isfinite(v), "a finite number", float),
    Any: lambda v: v,
}


def _reader(tp: Any) -> Callable[[Any], Any]:
    """The function that reads decoded JSON as a value of type ``tp`` (or raises _Bad)."""
    if tp in _SCALARS:
        return _SCALARS[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]  # every union of the schema is "X | None"
        inner_read = _reader(inner)
        return lambda v: None if v is None else inner_read(v)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _list_reader(_reader(args[0]))
    if origin is tuple:
        return _tuple_reader([_reader(a) for a in args])
    if origin is dict:
        return _dict_reader(_reader(args[1]))
    if tp is Alloc:
        read4 = _tuple_reader([_SCALARS[int]] * 4)
        return lambda v: Alloc(*read4(v))
    if isinstance(tp, type) and issubclass(tp, _Record):
        return tp._read
    raise TypeError(f"no JSON reader for {tp!r}")  # a schema bug, not a file problem


def _item(read: Callable[[Any], Any], v: Any, step: str) -> Any:
    try:
        return read(v)
    except _Bad as err:
        err.path.append(step)
        raise


def _all_int(v: list[Any]) -> bool:
    """The common case of shapes and ranges, checked in one pass."""
    return all(type(x) is int for x in v)


def _list_reader(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    ints = read is _SCALARS[int]

    def list_of(v: Any) -> tuple[Any, ...]:
        if not isinstance(v, list):
            raise _Bad.expected("a list", v)
        if ints and _all_int(v):
            return tuple(v)
        return tuple(_item(read, x, f"[{i}]") for i, x in enumerate(v))

    return list_of


def _tuple_reader(reads: list[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    ints = all(r is _SCALARS[int] for r in reads)

    def fixed(v: Any) -> tuple[Any, ...]:
        if not isinstance(v, list) or len(v) != len(reads):
            raise _Bad.expected(f"a list of {len(reads)}", v)
        if ints and _all_int(v):
            return tuple(v)
        return tuple(_item(r, x, f"[{i}]") for i, (r, x) in enumerate(zip(reads, v)))

    return fixed


def _dict_reader(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def mapping(v: Any) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise _Bad.expected("a JSON object", v)
        return {k: _item(read, x, f"['{k}']") for k, x in v.items()}

    return mapping


def read_tagged(table: Mapping[str, type[_Record]], key: str, doc: Any, where: str) -> Any:
    """Read a document whose ``key`` (``op`` / ``kind``) picks its class in ``table``."""
    tag = doc.get(key) if isinstance(doc, dict) else None
    cls = table.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise ModelFormatError(f"{where}: unknown {key} {tag!r} (expected one of {', '.join(table)})")
    return cls.from_json(doc, f"{where} ({tag})")


def read_list(doc: Any, where: str) -> list[Any]:
    if not isinstance(doc, list):
        raise ModelFormatError(f"{where}: {_Bad.expected('a list', doc).what}")
    return doc
