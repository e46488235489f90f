"""The local-memory audit (``helpers.audit_local_memory``) derives footprints on its own.

Its per-lane footprint is DESIGN.md's ``N * ceil(C / lanes) * align(H * W, EU) * bytes``
written out in the test helpers; here that derivation and the simulator's own are both held
against numbers worked out by hand, and the audit is shown to fail on a program whose recorded
footprints or allocations are wrong.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import opbridge as ob
from opbridge.simulator import GroupUnit, Load
from opbridge.simulator.memory import activation_lane_bytes, constant_lane_bytes

from .helpers import assert_close, audit_local_memory, lane_bytes

BM1684 = ob.Target.preset("bm1684")  # 64 lanes, 128-byte EUs: 32 f32 or 64 f16 per EU


# (shape, dtype, const, bytes per lane worked out by hand)
HAND = [
    ((1, 64, 8, 8), "f32", False, 1 * 1 * 64 * 4),          # 64 ch on 64 lanes, 64 = 2 EUs
    ((1, 65, 8, 8), "f32", False, 1 * 2 * 64 * 4),          # a 65th channel takes a 2nd plane
    ((2, 96, 7, 5), "f32", False, 2 * 2 * 64 * 4),          # 35 elements round up to 64
    ((1, 3, 10, 10), "f16", False, 1 * 1 * 128 * 2),        # f16 EU = 64: 100 -> 128
    ((3, 130, 1, 1), "f32", False, 3 * 3 * 32 * 4),         # 130 ch -> 3 planes of one EU
    ((48, 32, 3, 3), "f32", True, 1 * 288 * 4),             # weights by output channel: 288 = 9 EUs
    ((130, 7), "f32", True, 3 * 32 * 4),                    # 130 rows -> 3 per lane, 7 -> 32
    ((1, 96, 1, 1), "f32", True, 1 * 2 * 32 * 4),           # (1, C, H, W): the activation layout
]


@pytest.mark.parametrize("shape,dtype,const,want", HAND,
                         ids=[f"{'const' if c else 'act'}{list(s)}-{d}" for s, d, c, _ in HAND])
def test_footprint_by_hand(shape, dtype, const, want):
    assert lane_bytes(BM1684, shape, dtype, const) == want
    code = constant_lane_bytes if const else activation_lane_bytes
    assert code(BM1684, shape, dtype) == want


def _wide_graph() -> ob.Graph:
    """96 channels (more than the lanes, not a multiple) on odd planes, 3x3 convs."""
    rng = np.random.default_rng(4)
    b = ob.GraphBuilder("wide")
    x = b.input("x", "f32", (2, 96, 13, 11))
    w1 = b.constant("w1", (rng.standard_normal((96, 96, 3, 3)) * 0.03).astype(np.float32))
    y = b.op("Relu", [b.op("Conv", [x, w1], strides=(1, 1), pads=(1, 1, 1, 1))])
    w2 = b.constant("w2", (rng.standard_normal((70, 96, 1, 1)) * 0.1).astype(np.float32))
    b.output(b.op("Conv", [y, w2], strides=(1, 1), pads=(0, 0, 0, 0)))
    return b.build()


@pytest.fixture(scope="module")
def wide() -> ob.Program:
    return ob.compile(_wide_graph(), ob.Target.preset("bm1684", lmem_bytes_per_lane=9 * 1024))


def test_wide_channels_tile_and_pass_the_audit(wide):
    assert len(wide.groups) == 1 and wide.groups[0].n_per == 1 and wide.groups[0].k > 1
    x = {"x": np.random.default_rng(0).standard_normal((2, 96, 13, 11)).astype(np.float32)}
    out = wide.run(x)
    ref = ob.interpret(wide.graph, x)
    for k in ref:
        assert_close(out[k], ref[k], k)
    assert audit_local_memory(wide) > 0


def test_audit_fails_on_a_recorded_footprint_too_small(wide):
    i = next(j for j, ins in enumerate(wide.instrs) if isinstance(ins, Load) and not ins.const)
    bad = ob.Program(wide.graph, wide.target, wide.units, list(wide.instrs), wide.ddr)
    bad.instrs[i] = dataclasses.replace(wide.instrs[i], lane_bytes=wide.instrs[i].lane_bytes // 2)
    with pytest.raises(AssertionError, match="records"):
        audit_local_memory(bad)


def test_audit_fails_on_an_allocation_too_small(wide):
    g = wide.groups[0]
    key = next(k for k in g.alloc if not k.startswith("scratch/"))
    a = g.alloc[key]
    small = dataclasses.replace(g, alloc={**g.alloc, key: dataclasses.replace(a, size=a.size - 64)})
    units = [small if u is g else u for u in wide.units]
    assert isinstance(small, GroupUnit)
    with pytest.raises(AssertionError, match="needs"):
        audit_local_memory(ob.Program(wide.graph, wide.target, units, wide.instrs, wide.ddr))
