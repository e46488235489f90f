"""The mapping registry: which function turns an origin op into IR, per framework and version.

Two public ways to register, both ending in :meth:`MappingRegistry.register`:

- ``@mapping(Framework.ONNX, "Gemm", since_opset=11)`` for a function that may emit any
  subgraph (one-to-many);
- ``register_custom_op("Upsample").framework_type(...).origin_op_type(...)
  .parse_params_by_operator_fn(fn).imply_type(...)`` for a one-to-one attribute mapping.

Keys are (framework, domain, origin op type, since_opset). A plain op type (``"FooScale"``)
matches that op in any domain the model declares; ``"com.example::FooScale"`` pins the domain
and wins over a plain registration. Lookup picks the highest ``since_opset`` <= the model's
version for the node's domain, and never falls back silently.

Where a node runs (TPU or host CPU) is not kept here: it is the IR node's ``placement``,
recorded in ``.obir``. An op definition gives the default (``define_op(...).placement("cpu")``);
a mapping may place the nodes it emits (``g.op(..., placement="cpu")``, or
``.imply_type(ImplyType.CPU)`` on the builder).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..errors import MappingError as MappingError  # its home is errors.py; kept importable here
from ..errors import RegistryError, UnsupportedOpError
from ..families import DEFAULT_LOADER, FamilyLoader
from ..ir.opdef import DEFAULT_OPS
from ..parsers.origin import Framework, OriginNode
from ..sites import caller_site

if TYPE_CHECKING:
    from .context import MapContext

MapFn = Callable[[OriginNode, "MapContext"], Any]

#: Domain names that mean "the default ONNX domain".
DEFAULT_DOMAINS = ("", "ai.onnx")


class ImplyType(str, Enum):
    """Where an IR op runs: on the TPU (default) or on the host CPU, between TPU segments."""

    TPU = "tpu"
    CPU = "cpu"

    def __str__(self) -> str:
        return self.value


def normalize_domain(domain: str | None) -> str:
    """``"ai.onnx"`` and ``""`` are one domain; returned as ``""``."""
    d = domain or ""
    return "" if d in DEFAULT_DOMAINS else d


def split_op_key(op_type: str) -> tuple[str | None, str]:
    """``"com.example::Foo"`` -> ("com.example", "Foo"); ``"Foo"`` -> (None, "Foo") (any domain)."""
    if "::" in op_type:
        domain, _, name = op_type.rpartition("::")
        return normalize_domain(domain), name
    return None, op_type


def _site_of(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    if code is None:
        return "<unknown>"
    return f"{code.co_filename}:{code.co_firstlineno}"


#: The registry's own modules, skipped when finding who registered something.
_OWN_FILES = {os.path.join(os.path.dirname(os.path.abspath(__file__)), f) for f in ("registry.py", "custom_op.py")}


def _caller_site() -> str:
    """file:line of the first frame outside the registry's own modules."""
    return caller_site(*_OWN_FILES)


@dataclass
class MappingEntry:
    """One registered mapping: the key, the function, and where it was registered."""

    framework: Framework
    domain: str | None
    op_type: str
    since: int
    fn: MapFn
    defined_at: str
    #: The IR op a one-to-one (register_custom_op) mapping emits; None for @mapping functions.
    ir_op: str | None = None

    @property
    def key_text(self) -> str:
        return f"{self.domain}::{self.op_type}" if self.domain is not None else self.op_type


class MappingRegistry:
    """A table of mappings; :data:`DEFAULT_MAPPINGS` is the one the package uses.

    Tests can make their own instance and pass it to ``convert_origin_graph(registry=...)``.
    """

    def __init__(self, loader: FamilyLoader | None = None) -> None:
        # (framework, domain or None, op type) -> {since: entry}
        self._table: dict[tuple[Framework, str | None, str], dict[int, MappingEntry]] = {}
        self._fallbacks: list[tuple[Callable[[OriginNode, int | None], MapFn | None], str,
                                    Framework | None]] = []
        #: Imports the built-in families as keys are first asked for (see opbridge.families);
        #: None (tests' own registries): only what is registered on this one.
        self._loader = loader

    def _load(self, fw: Framework, domain: str | None, op_type: str) -> None:
        if self._loader is not None:
            self._loader.load_mapping(fw.value, domain, op_type)

    def _load_all(self, fw: Framework | None) -> None:
        if self._loader is not None:
            self._loader.load_all_mappings(fw.value if fw is not None else None)
            self._loader.load_fallbacks(fw.value if fw is not None else None)

    # -- registering ----------------------------------------------------------------------
    def register(
        self,
        framework: Framework | str,
        op_type: str,
        fn: MapFn,
        *,
        since_opset: int = 1,
        override: bool = False,
        defined_at: str | None = None,
        ir_op: str | None = None,
    ) -> MappingEntry:
        """Register ``fn`` for ``op_type``; a second registration of the same key raises."""
        fw = Framework(framework)
        if not isinstance(op_type, str) or not op_type or op_type.endswith("::"):
            raise RegistryError(f"mapping for {op_type!r}: the origin op type must be a non-empty string",
                                hint="give the op type as the model spells it (e.g. 'Conv', 'aten::relu', "
                                     "'com.vendor::MyOp')")
        if isinstance(since_opset, bool) or not isinstance(since_opset, int) or since_opset < 1:
            raise RegistryError(f"mapping for {fw} {op_type}: since_opset={since_opset!r} must be an int >= 1",
                                hint="give the first opset of the op's version this mapping follows "
                                     "(since_opset=1 when it does not matter)")
        domain, name = split_op_key(op_type)
        site = defined_at or _caller_site()
        self._load(fw, domain, name)  # a built-in of the same key registers first, wherever this runs from
        versions = self._table.setdefault((fw, domain, name), {})
        old = versions.get(since_opset)
        if old is not None and not override:
            raise RegistryError(
                f"mapping for [{fw}] {op_type} since_opset={since_opset} is registered twice: "
                f"first at {old.defined_at}, again at {site}",
                hint="pass override=True to the second registration to replace the first",
            )
        entry = MappingEntry(fw, domain, name, since_opset, fn, site, ir_op)
        versions[since_opset] = entry
        return entry

    def unregister(self, entry: MappingEntry) -> None:
        self._load(entry.framework, entry.domain, entry.op_type)
        versions = self._table.get((entry.framework, entry.domain, entry.op_type), {})
        if versions.get(entry.since) is entry:
            del versions[entry.since]

    def add_fallback(self, fn: Callable[[OriginNode, int | None], MapFn | None], *, name: str,
                     framework: Framework | str | None = None) -> None:
        """Consult ``fn(node, version)`` for a node with no mapping; it returns a MapFn or None.

        Explicit mappings always win; the ONNX frontend uses this to expand ops that ONNX
        defines as functions of other ops (``onnx.defs`` bodies). ``framework`` limits it to
        that framework's nodes.
        """
        self._fallbacks.append((fn, name, Framework(framework) if framework is not None else None))

    def fallback_names(self, framework: Framework | str | None = None) -> list[str]:
        """The names of the fallbacks (that apply to ``framework``), in the order consulted."""
        fw = Framework(framework) if framework is not None else None
        if self._loader is not None:
            self._loader.load_fallbacks(fw.value if fw is not None else None)
        return [name for _fn, name, f in self._fallbacks if fw is None or f is None or f == fw]

    def fallback(self, node: OriginNode, version: int | None) -> MappingEntry | None:
        """A MappingEntry from the first fallback that handles ``node``, or None."""
        if self._loader is not None:
            self._loader.load_fallbacks(Framework(node.framework).value)
        for fn, name, fw in self._fallbacks:
            if fw is not None and node.framework != fw:
                continue
            mfn = fn(node, version)
            if mfn is not None:
                return MappingEntry(node.framework, None, node.op_type, version or 1, mfn,
                                    f"<fallback: {name}>")
        return None

    # -- looking up -----------------------------------------------------------------------
    def versions(self, framework: Framework | str, op_type: str, domain: str | None = None) -> list[int]:
        """The registered since-versions for an op (pinned to ``domain`` and plain), ascending."""
        fw = Framework(framework)
        self._load(fw, normalize_domain(domain) if domain is not None else None, op_type)
        out = set(self._table.get((fw, None, op_type), {}))
        if domain is not None:
            out |= set(self._table.get((fw, normalize_domain(domain), op_type), {}))
        return sorted(out)

    def find(
        self, framework: Framework | str, op_type: str, domain: str = "", version: int | None = None
    ) -> MappingEntry | None:
        """The entry for ``op_type`` in ``domain`` at ``version`` (None: the newest), or None.

        A domain-pinned registration wins over a plain one when both have a usable version.
        """
        fw = Framework(framework)
        self._load(fw, normalize_domain(domain), op_type)
        entry = self._find_loaded(fw, op_type, domain, version)
        if entry is None and self._loader is not None and self._loader.miss_mapping(fw.value):
            entry = self._find_loaded(fw, op_type, domain, version)  # a key the index does not know yet
        return entry

    def _find_loaded(self, fw: Framework, op_type: str, domain: str, version: int | None) -> MappingEntry | None:
        for key in ((fw, normalize_domain(domain), op_type), (fw, None, op_type)):
            versions = self._table.get(key)
            if not versions:
                continue
            usable = [v for v in versions if version is None or v <= version]
            if usable:
                return versions[max(usable)]
        return None

    def lookup(
        self, framework: Framework | str, op_type: str, domain: str = "", version: int | None = None
    ) -> MappingEntry:
        """Like :meth:`find`, but a missing mapping is an UnsupportedOpError that says why."""
        entry = self.find(framework, op_type, domain, version)
        if entry is not None:
            return entry
        fw = Framework(framework)
        vs = self.versions(fw, op_type, domain)
        shown = qualified_name(op_type, domain)
        if vs:
            raise UnsupportedOpError(
                f"[{fw}] {shown}: no mapping version <= {version}; registered since-versions: "
                f"{', '.join(map(str, vs))}",
                hint=f"register one: {registration_line(fw, op_type, domain, version)}",
            )
        raise UnsupportedOpError(
            f"[{fw}] {shown}: no mapping is registered",
            hint=f"register one: {registration_line(fw, op_type, domain, version)}",
        )

    def entries(self, framework: Framework | str | None = None) -> Iterator[MappingEntry]:
        """Every entry (optionally of one framework), sorted by op type, domain and version."""
        fw = Framework(framework) if framework is not None else None
        self._load_all(fw)
        rows = [
            e for (f, _d, _o), versions in self._table.items() if fw is None or f == fw
            for e in versions.values()
        ]
        rows.sort(key=lambda e: (e.framework.value, e.op_type, e.domain or "", e.since))
        return iter(rows)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        fw, op = key
        domain, name = split_op_key(op)
        self._load(Framework(fw), domain, name)
        return bool(self._table.get((Framework(fw), domain, name)))


def qualified_name(op_type: str, domain: str | None) -> str:
    d = normalize_domain(domain)
    return f"{d}::{op_type}" if d else op_type


def registration_line(
    framework: Framework, op_type: str, domain: str | None = "", version: int | None = None
) -> str:
    """The Python line that would register a mapping for this op."""
    key = qualified_name(op_type, domain)
    since = f", since_opset={version}" if framework == Framework.ONNX and version else ""
    return f'@opbridge.mapping(opbridge.Framework.{framework.name}, "{key}"{since})'


DEFAULT_MAPPINGS = MappingRegistry(DEFAULT_LOADER)


def imply_type_of(ir_op: str) -> ImplyType:
    """Deprecated: the default placement of IR op ``ir_op``'s definition (TPU if it is not
    defined). Where a node runs is its own ``placement``."""
    warnings.warn(
        "imply_type_of is deprecated: where a node runs is its `placement` attribute (kept in "
        ".obir); an op's default is `opbridge.ir.get_op(name).default_placement`",
        DeprecationWarning, stacklevel=2)
    if ir_op not in DEFAULT_OPS:
        return ImplyType.TPU
    return ImplyType(DEFAULT_OPS.get(ir_op).default_placement)


def set_imply_type(ir_op: str, imply: ImplyType | str) -> None:
    """Deprecated: declares the default placement on the op definition of ``ir_op``."""
    warnings.warn(
        'set_imply_type is deprecated: declare it on the op definition, define_op(...)'
        '.placement("cpu"), or place one node from a mapping with g.op(..., placement="cpu")',
        DeprecationWarning, stacklevel=2)
    DEFAULT_OPS.get(ir_op).placement(imply)


def mapping(
    framework: Framework | str,
    origin_op_type: str,
    *,
    since_opset: int = 1,
    override: bool = False,
    registry: MappingRegistry | None = None,
) -> Callable[[MapFn], MapFn]:
    """Decorator: register ``fn(node, g)`` as the mapping of ``origin_op_type`` from ``since_opset``.

    ``fn`` receives the OriginNode and a MapContext and returns the Value(s) for the node's
    outputs, in order. ``origin_op_type`` may pin a domain: ``"com.example::FooScale"``.
    """
    reg = registry if registry is not None else DEFAULT_MAPPINGS

    def deco(fn: MapFn) -> MapFn:
        reg.register(framework, origin_op_type, fn, since_opset=since_opset, override=override,
                     defined_at=_site_of(fn))
        return fn

    return deco
