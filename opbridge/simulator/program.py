"""The compiled program, and its ``.obprog`` file (see ``docs/obprog.md``).

A Program is the graph (for its op definitions and weights), the target, the units (layer
groups, global layers, host-CPU ops) with their local-memory allocations, the DDR plan and
the instruction list. The file is a safetensors file: the weights are its tensors, and the
metadata holds ``format = "opbridge.obprog"``, ``format_version`` and two JSON documents,
``graph`` (as in ``.obir``) and ``program``. No pickle.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

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
FORMAT_VERSION = 1


class Program:
    """A compiled program for a simulated target: run it, profile it, save it."""

    def __init__(
        self,
        graph: Graph,
        target: Target,
        units: list[dict[str, Any]],
        instrs: list[dict[str, Any]],
        ddr: dict[str, Any],
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
    def groups(self) -> list[dict[str, Any]]:
        return [u for u in self.units if u["kind"] == "group"]

    @property
    def num_tiles(self) -> int:
        return sum(u["tiles"] for u in self.groups)

    def __repr__(self) -> str:
        kinds = [u["kind"] for u in self.units]
        return (f"Program({self.graph.name!r}, target={self.target.name}, "
                f"{kinds.count('group')} layer groups, {self.num_tiles} tiles, "
                f"{kinds.count('global')} global layers, {kinds.count('host')} host ops, "
                f"{len(self.instrs)} instructions)")

    # -- files ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"target": self.target.to_dict(), "units": self.units, "ddr": self.ddr,
                "instructions": self.instrs}

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
    gdoc = read_json(meta.get("graph", ""), f"'{path}': the graph JSON")
    pdoc = read_json(meta.get("program", ""), f"'{path}': the program JSON")

    try:
        graph = graph_from_json(gdoc, tensor, DEFAULT_OPS)
        target = Target.from_dict(pdoc["target"], where=f"'{path}'")
        prog = Program(graph, target, list(pdoc["units"]), list(pdoc["instructions"]),
                       dict(pdoc["ddr"]))
    except OpbridgeError as err:
        raise type(err)(f"'{path}': {err.message}", hint=err.hint) from None
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ModelFormatError(f"'{path}': not a valid .obprog program: {err!r}") from None
    try:
        _check_program(prog, str(path))
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ModelFormatError(f"'{path}': not a valid .obprog program: {err!r}") from None
    return prog


def _check_program(prog: Program, where: str) -> None:
    """Structural checks of a loaded program, before anything is allocated."""
    nodes = {n.name for n in prog.graph.nodes}
    tensors = prog.ddr.get("tensors", {})
    total = prog.ddr.get("total_bytes")
    if not isinstance(total, int) or total < 0 or total > (1 << 36):
        raise ModelFormatError(f"{where}: DDR size {total!r} is not a sane byte count")
    for ins in prog.instrs:
        op = ins.get("op") if isinstance(ins, dict) else None
        if op not in ("load", "store", "compute", "global", "host"):
            raise ModelFormatError(f"{where}: unknown instruction {op!r}")
        if op in ("compute", "global", "host") and ins.get("node") not in nodes:
            raise ModelFormatError(f"{where}: instruction names unknown node {ins.get('node')!r}")
        if op in ("load", "store") and ins.get("tensor") not in tensors:
            raise ModelFormatError(f"{where}: instruction names unknown tensor {ins.get('tensor')!r}")
    values = prog.graph.values()
    align_bytes = max(int(prog.target.ddr_align_bytes), 1)
    for name, t in tensors.items():
        if not isinstance(t.get("addr"), int) or not isinstance(t.get("nbytes"), int):
            raise ModelFormatError(f"{where}: DDR tensor '{name}' has no integer addr/nbytes")
        if t["addr"] < 0 or t["nbytes"] < 0 or t["addr"] + t["nbytes"] > total:
            raise SimulatorError(f"{where}: tensor '{name}' lies outside the DDR plan")
        # the plan must describe the graph's own tensor: same shape, dtype and size
        v = values.get(name)
        if v is None:
            raise ModelFormatError(f"{where}: the DDR plan places '{name}', which the graph lacks")
        if (list(t.get("shape", ())) != list(v.shape) or t.get("dtype") != v.dtype
                or t["nbytes"] != int(np.prod(v.shape, dtype=np.int64)) * itemsize(v.dtype)):
            raise ModelFormatError(
                f"{where}: the DDR plan gives '{name}' as {t.get('dtype')}{t.get('shape')} "
                f"({t['nbytes']} bytes); the graph has {v.dtype}{list(v.shape)}")
    # with reuse a plan is never larger than every tensor laid end to end
    bound = sum(t["nbytes"] + align_bytes for t in tensors.values())
    if total > bound:
        raise ModelFormatError(f"{where}: DDR size {total} exceeds what its {len(tensors)} tensors "
                               f"can need ({bound} bytes)")
