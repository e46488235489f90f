"""The partition step sits above the two planners: layer groups and streamed layers are
planned by modules that do not import each other, and the partition picks between them."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.simulator import GlobalUnit, GroupUnit, StreamUnit

SIM = Path(ob.__file__).parent / "simulator"


def _imports(module: str) -> set[str]:
    """The simulator modules ``module`` imports (relative imports, at any depth of the file)."""
    tree = ast.parse((SIM / f"{module}.py").read_text())
    return {n.module.split(".")[0] for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module}


@pytest.mark.parametrize("a,b", [("layergroup", "stream"), ("stream", "layergroup")])
def test_planners_do_not_import_each_other(a, b):
    assert b not in _imports(a)
    assert {"partition", "compiler"}.isdisjoint(_imports(a))


def test_partition_imports_both_planners():
    assert {"layergroup", "stream"} <= _imports("partition")


def test_partition_picks_group_stream_and_global():
    """At 2 KiB a lane a conv with 256 x 3x3x32 weights fits no tile and streams, the Relu and
    the Sigmoid after it form a layer group, and a Flatten (no tiling hints) runs as a global
    layer, as does a Relu alone between two units (a one-op group runs global)."""
    rng = np.random.default_rng(5)
    b = ob.GraphBuilder("mixed")
    x = b.input("x", "f32", (1, 32, 10, 12))
    y = b.op("Conv", [x, b.constant("w", (rng.standard_normal((256, 32, 3, 3)) * 0.05).astype(np.float32))],
             pads=(1, 1, 1, 1))
    y = b.op("Sigmoid", [b.op("Relu", [y])])
    y = b.op("Relu", [b.op("Flatten", [y], axis=1)])
    b.output(b.op("Flatten", [y], axis=1))
    prog = ob.compile(b.build(), ob.Target.preset("bm1684", lmem_bytes_per_lane=2 * 1024))
    kinds = [(type(u), [prog.graph.node(n).op for n in u.nodes]) for u in prog.units]
    assert kinds == [(StreamUnit, ["Conv"]), (GroupUnit, ["Relu", "Sigmoid"]), (GlobalUnit, ["Flatten"]),
                     (GlobalUnit, ["Relu"]), (GlobalUnit, ["Flatten"])]
