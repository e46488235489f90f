"""A layer group's first loads run in the idle GDMA time of the group before it (TPU-MLIR's
``GroupDataMoveOverlapPass``, ``lib/Dialect/Tpu/Transforms/LayerGroup/GroupOverlap.cpp``),
where their local memory is free and their data ready; only between two groups of more than
one op each, and not into a group of at most two batch x row steps (bm1684 preset).

Two groups of two layers each (groups are capped at two layers here, so the partition closes
one after the 3x3 conv and its Relu): x (1, 16, 32, 32) -> 3x3 conv 16 -> 16 -> Relu, then a
1x1 conv 16 -> 64 -> Relu. At 8 KiB a lane the first group runs in three row tiles, and its
lanes are busy on the last tiles while GDMA waits for their stores: the second group's
weights (64 x 16 f32, 4,096 bytes) load there, so the second group starts its loads at its
input and ends one weight transfer earlier: ``gdma_latency_us`` + 4,096 bytes over
``ddr_bandwidth_gbps`` (0.564 us). Its input, the first group's output, still waits for
its store.
"""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
import opbridge.simulator.cost as cost
import opbridge.simulator.partition as partition
from opbridge.simulator import GroupUnit

SEC = 1e-6


def _graph(second_relu: bool = True) -> ob.Graph:
    rng = np.random.default_rng(0)
    b = ob.GraphBuilder("two_groups")
    x = b.input("x", "f32", (1, 16, 32, 32))
    a = b.op("Conv", [x, b.constant("w1", (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32))],
             pads=(1, 1, 1, 1))
    a = b.op("Relu", [a])
    c = b.op("Conv", [a, b.constant("w2", (rng.standard_normal((64, 16, 1, 1)) * 0.1).astype(np.float32))])
    b.output(b.op("Relu", [c]) if second_relu else c)
    return b.build()


@pytest.fixture
def two_layer_groups(monkeypatch):
    monkeypatch.setattr(partition, "MAX_GROUP_NODES", 2)


def _without_overlap(prog: ob.Program) -> float:
    saved = cost.group_overlap
    cost.group_overlap = lambda prev, u, fused: False
    try:
        return prog.profile().est_latency_ms
    finally:
        cost.group_overlap = saved


def _compile(lmem: int, second_relu: bool = True) -> tuple[ob.Target, ob.Program]:
    t = ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem)
    g = _graph(second_relu)
    prog = ob.compile(g, t)
    x = np.random.default_rng(1).standard_normal((1, 16, 32, 32)).astype(np.float32)
    want = ob.interpret(g, {"x": x})
    got = prog.run({"x": x})
    for name, v in want.items():
        np.testing.assert_allclose(got[name], v, rtol=1e-5, atol=1e-5)
    return t, prog


def test_next_group_weights_load_in_the_previous_groups_idle_time(two_layer_groups):
    t, prog = _compile(8192)
    assert [type(u) for u in prog.units] == [GroupUnit, GroupUnit]
    up, down = prog.units
    assert up.tiles == 3 and len(up.nodes) == 2 and len(down.nodes) == 2
    assert cost.group_overlap(up, down, cost.fused_epilogues(prog.graph.nodes, set()))
    w2 = t.gdma_latency_us * SEC + 64 * 16 * 4 / (t.ddr_bandwidth_gbps * 1e9)
    p = prog.profile()
    assert _without_overlap(prog) - p.est_latency_ms == pytest.approx(w2 * 1e3, rel=1e-6)
    load = next(e for e in p.events if e["name"] == "load w2")
    # the weights load in the first group's time: not before it starts (nor in the sync before
    # it), and before it ends
    assert p.units[0].start_ms * 1e3 <= load["ts"]
    assert load["ts"] + load["dur"] <= p.units[0].end_ms * 1e3
    assert p.units[1].start_ms < p.units[0].end_ms


def test_no_overlap_after_a_group_of_at_most_two_steps(two_layer_groups):
    """At 16 KiB a lane the first group is one tile: nothing moves into it."""
    _, prog = _compile(16384)
    assert [u.tiles for u in prog.units] == [1, 1]
    assert prog.profile().est_latency_ms == _without_overlap(prog)


def test_no_overlap_into_or_from_a_one_op_side(two_layer_groups):
    """The second group is the 1x1 conv alone: TPU-MLIR skips a side with one op."""
    _, prog = _compile(8192, second_relu=False)
    up, down = prog.units
    assert up.tiles == 3 and len(down.nodes) == 1
    assert not cost.group_overlap(up, down, cost.fused_epilogues(prog.graph.nodes, set()))
    assert prog.profile().est_latency_ms == _without_overlap(prog)
