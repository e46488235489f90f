"""Loading the built-in op definitions and mappings per family, on first use.

The built-in registrations live in family modules (``opbridge/ir/ops/conv.py``,
``opbridge/mappers/onnx/conv.py``, ...), listed by name in their package's ``FAMILIES``.
Importing one registers its ops or mappings through the public API, as a plugin would.
Nothing imports them up front: :data:`DEFAULT_LOADER` imports a family when a registry is
first asked about a name it registers, from the generated :mod:`opbridge.registry_index`
(``python -m opbridge.tools.registry_index`` rewrites it; a test checks it is up to date).

Lazy loading never changes what a registry answers:

- a registry asked for a name loads the families the index names for it; a name the index
  does not know loads every family of that kind before the registry says it is missing;
- a registration (a plugin's ``define_op``, ``@mapping``) first loads the built-in family
  that registers the same key, so a duplicate is still an error naming both places, and an
  ``override=True`` replaces the built-in, whichever is imported first;
- listing a registry (``opbridge ops``, ``DEFAULT_OPS.names()``) loads every family.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable
from types import ModuleType
from typing import Any

#: The packages of built-in family modules; each lists its modules in ``FAMILIES``.
OP_PACKAGES = ("opbridge.ir.ops",)
MAPPING_PACKAGES = ("opbridge.mappers.onnx", "opbridge.mappers.caffe", "opbridge.mappers.torchscript")

#: A mapping key in the index: (framework, domain or None for any domain, origin op type).
MappingKey = tuple[str, "str | None", str]


def family_modules(packages: Iterable[str]) -> list[str]:
    """The full module names of the families of ``packages``, in their ``FAMILIES`` order."""
    out: list[str] = []
    for pkg in packages:
        out += [f"{pkg}.{name}" for name in importlib.import_module(pkg).FAMILIES]
    return out


class FamilyLoader:
    """Imports family modules on demand, each once, guided by an index of what each registers.

    ``index`` is a module (or object) with ``OPS`` (op name -> modules), ``MAPPINGS``
    (:data:`MappingKey` -> modules) and ``FALLBACKS`` (framework -> modules); None reads
    :mod:`opbridge.registry_index` on first use. With ``fill_misses`` False (the index
    generator) a name the index does not know loads nothing more.
    """

    def __init__(self, index: Any = None, *, fill_misses: bool = True) -> None:
        self._index = index
        self.fill_misses = fill_misses
        self.loaded: set[str] = set()
        # Held while a family imports, so that another thread asking for one of its names
        # waits for it instead of finding it half registered; re-entrant for nested loads.
        self._lock = threading.RLock()

    @property
    def index(self) -> Any:
        if self._index is None:
            from . import registry_index

            self._index = registry_index
        return self._index

    def load(self, modules: Iterable[str]) -> list[ModuleType]:
        """Import ``modules`` (full names) that this loader has not imported yet."""
        out = []
        with self._lock:
            for name in modules:
                if name in self.loaded:
                    continue
                self.loaded.add(name)  # first: the module's own registrations must not load it again
                try:
                    out.append(importlib.import_module(name))
                except BaseException:
                    self.loaded.discard(name)
                    raise
        return out

    def load_op(self, name: str) -> None:
        """Load the families that define op ``name``."""
        self.load(self.index.OPS.get(name, ()))

    def load_mapping(self, framework: str, domain: str | None, op_type: str) -> None:
        """Load the families that register a mapping for ``op_type`` (pinned to ``domain``
        and plain)."""
        mappings = self.index.MAPPINGS
        self.load(mappings.get((framework, None, op_type), ()))
        if domain is not None:
            self.load(mappings.get((framework, domain, op_type), ()))

    def load_fallbacks(self, framework: str | None = None) -> None:
        for fw, modules in self.index.FALLBACKS.items():
            if framework is None or fw == framework:
                self.load(modules)

    def load_all_ops(self) -> None:
        """Every family: a mapping family may define the IR ops it emits, as a plugin does."""
        self.load(family_modules(OP_PACKAGES + MAPPING_PACKAGES))

    def load_all_mappings(self, framework: str | None = None) -> None:
        pkgs = [p for p in MAPPING_PACKAGES if framework is None or p.endswith(f".{framework}")]
        self.load(family_modules(pkgs))

    def miss_op(self) -> bool:
        """After a name the index did not lead to: load every op family; True if that loaded any."""
        return self.fill_misses and bool(self.load(family_modules(OP_PACKAGES + MAPPING_PACKAGES)))

    def miss_mapping(self, framework: str) -> bool:
        """Like :meth:`miss_op`, for the mappings of ``framework`` (and the fallbacks)."""
        if not self.fill_misses:
            return False
        before = len(self.loaded)
        self.load_all_mappings(framework)
        self.load_fallbacks(framework)
        return len(self.loaded) != before


#: The loader behind :data:`opbridge.ir.opdef.DEFAULT_OPS` and
#: :data:`opbridge.mappers.registry.DEFAULT_MAPPINGS`.
DEFAULT_LOADER = FamilyLoader()
