"""What a reduction costs, by hand: one operation per element it reads, spread over the lanes
the way its input lies (channels over the lanes, pixels along the EU), not the way its one-element
or smaller output does.

The figures below are written from the preset's fields: the vector rate is ``lanes x EU
elements x clock`` (BM1684: 64 x 32 f32 x 550 MHz), times the "vector" efficiency and the
fill of the lanes and the EU row by the input.
"""

from __future__ import annotations

import math

import pytest

import opbridge as ob
from opbridge.simulator.cost import compute_seconds, reduced_axes
from opbridge.simulator.schema import Compute, GlobalOp


def _fill(used: int, unit: int) -> float:
    return used / (math.ceil(used / unit) * unit)


def _reduce_graph(shape: tuple[int, ...], **attrs) -> ob.Graph:
    b = ob.GraphBuilder("reduce")
    b.output(b.op("ReduceMean", [b.input("x", "f32", shape)], **attrs))
    return b.build()


def _instr(prog: ob.Program, kind: type):
    (ins,) = [i for i in prog.instrs if isinstance(i, kind) and prog.graph.node(i.node).op == "ReduceMean"]
    return ins


@pytest.mark.parametrize("chip", ["bm1684", "bm1684x"])
def test_whole_tensor_mean_reads_every_element_over_the_channels(chip):
    """mean(f) of a (1, 64, 4, 18) tensor to one element (LPRNet's context normalisation): 4608
    elements read, 64 channels on the 64 lanes, 72 pixels in ceil(72 / EU) EU rows."""
    t = ob.Target.preset(chip)
    prog = ob.compile(_reduce_graph((1, 64, 4, 18), axes=(0, 1, 2, 3), keepdims=0), t)
    ins = _instr(prog, GlobalOp)
    assert ins.flops == 64 * 4 * 18 == 4608
    eu = t.eu_bytes // 4
    rate = t.lanes * eu * t.clock_mhz * 1e6 * t.efficiency["vector"]
    expected = 4608 / (rate * _fill(64, t.lanes) * _fill(72, eu))
    node = prog.graph.node(ins.node)
    assert compute_seconds(t, node, (), ins.flops) == pytest.approx(expected, rel=1e-12)


def test_bm1684_whole_tensor_mean_figure():
    """The BM1684 case in numbers: 64 x 32 x 550 MHz = 1.1264e12 elements/s, 72 pixels fill
    72 of 96 EU slots: 4608 / (1.1264e12 x 0.75) = 5.45 ns (through its one-element output it
    would fill 1 of 64 x 32 slots, floored at 1e-3: 4.1 us)."""
    t = ob.Target.preset("bm1684")
    prog = ob.compile(_reduce_graph((1, 64, 4, 18), axes=(0, 1, 2, 3), keepdims=0), t)
    ins = _instr(prog, GlobalOp)
    got = compute_seconds(t, prog.graph.node(ins.node), (), ins.flops)
    assert got == pytest.approx(4608 / (1.1264e12 * 0.75), rel=1e-12)
    assert 5.4e-9 < got < 5.5e-9


def test_mean_over_a_middle_axis_reads_that_axis():
    """torch.mean(x, dim=2) of (1, 68, 4, 18) without keepdims: each of the 68 x 18 outputs
    reads the 4 rows (not the last axis' 18)."""
    prog = ob.compile(_reduce_graph((1, 68, 4, 18), axes=(2,), keepdims=0), "bm1684")
    assert _instr(prog, GlobalOp).flops == 68 * 18 * 4


def test_empty_axes_reduce_everything_unless_noop():
    g = _reduce_graph((2, 3, 5), axes=(), keepdims=1)
    assert reduced_axes(g.nodes[0]) == (0, 1, 2)
    g = _reduce_graph((2, 3, 5), axes=(), keepdims=1, noop_with_empty_axes=1)
    assert reduced_axes(g.nodes[0]) == ()
    g = _reduce_graph((2, 3, 5), axes=(-1, 0), keepdims=1)
    assert reduced_axes(g.nodes[0]) == (0, 2)


def test_last_axis_mean_tile_reads_its_rows_whole_last_axis():
    """A LayerNorm's mean spelt out: ReduceMean over the 256 features of (2, 100, 256) with
    keepdims joins a layer group (with the Relu after it: alone it would run as a global layer,
    a one-op group); its tile reads rows x 256 elements, the rows over the lanes, the 256
    features along the EU (a full row of 32 f32), not the output's one column."""
    t = ob.Target.preset("bm1684")
    b = ob.GraphBuilder("reduce_relu")
    b.output(b.op("Relu", [b.op("ReduceMean", [b.input("x", "f32", (2, 100, 256))], axes=(-1,), keepdims=1)]))
    prog = ob.compile(b.build(), t)
    node = prog.graph.nodes[0]
    tiles = [i for i in prog.instrs if isinstance(i, Compute) and i.node == node.name]
    assert tiles and node.op == "ReduceMean"
    for ins in tiles:
        rows = math.prod(ins.out.shape[:-1])
        assert ins.out.shape[-1] == 1 and ins.flops == rows * 256
        rate = t.lanes * 32 * t.clock_mhz * 1e6 * t.efficiency["vector"]
        expected = ins.flops / (rate * _fill(rows, t.lanes) * _fill(256, 32))
        assert compute_seconds(t, node, ins.out.shape, ins.flops) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("chip", ["bm1684", "bm1684x"])
def test_units_pay_the_launch_once_and_a_sync_each(chip):
    """Relu on (1, 40, 50, 50), then the mean of it to one element, both global layers (the
    Relu alone would be a one-op group, which runs global): the program is the launch, then
    each unit after a sync, one after the other. A global layer holds GDMA and the lanes for
    the longer of its traffic (the Relu's 400,000-byte input and output, the mean's input and
    4-byte output, one set-up latency each) and its arithmetic."""
    t = ob.Target.preset(chip)
    b = ob.GraphBuilder("relu_mean")
    y = b.op("Relu", [b.input("x", "f32", (1, 40, 50, 50))])
    b.output(b.op("ReduceMean", [y], axes=(), keepdims=0))
    prog = ob.compile(b.build(), t)
    p = prog.profile()
    assert [u.kind for u in p.units] == ["global", "global"]
    elems = 40 * 50 * 50
    eu = t.eu_bytes // 4
    rate = t.lanes * eu * t.clock_mhz * 1e6 * t.efficiency["vector"]
    bw, lat = t.ddr_bandwidth_gbps * 1e9, t.gdma_latency_us * 1e-6
    relu = lat + max(2 * elems * 4 / bw, elems / (rate * _fill(40, t.lanes) * _fill(2500, eu)))
    ins = _instr(prog, GlobalOp)
    assert ins.bytes == elems * 4 + 4 and ins.flops == elems
    mean = lat + max((elems * 4 + 4) / bw, elems / (rate * _fill(40, t.lanes) * _fill(2500, eu)))
    assert p.units[0].est_ms == pytest.approx(relu * 1e3, rel=1e-9)
    assert p.units[1].est_ms == pytest.approx(mean * 1e3, rel=1e-9)
    fixed = (t.launch_us + 2 * t.sync_us) * 1e-6
    assert p.est_latency_ms == pytest.approx((fixed + relu + mean) * 1e3, rel=1e-9)


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceProd", "ReduceLogSum", "ReduceLogSumExp"])
def test_other_reductions_read_every_element(op):
    """The reductions without a tiled kernel run as global layers, and still read (and pay for)
    every element: ReduceL1 of (1, 64, 4, 18) to one element is 4608 operations."""
    b = ob.GraphBuilder("reduce_other")
    b.output(b.op(op, [b.input("x", "f32", (1, 64, 4, 18))], axes=(), keepdims=0))
    prog = ob.compile(b.build(), "bm1684")
    (ins,) = [i for i in prog.instrs if isinstance(i, GlobalOp)]
    assert ins.flops == 64 * 4 * 18


def test_global_average_pool_costs_what_the_same_mean_does():
    """GlobalAveragePool of (1, 64, 56, 56) and ReduceMean over axes (2, 3) do the same work on
    the same layout (channels over the lanes, the 3136 pixels along the EU): equal compute time."""
    t = ob.Target.preset("bm1684")
    b = ob.GraphBuilder("gap")
    b.output(b.op("GlobalAveragePool", [b.input("x", "f32", (1, 64, 56, 56))]))
    gap = ob.compile(b.build(), t)
    mean = ob.compile(_reduce_graph((1, 64, 56, 56), axes=(2, 3), keepdims=1), t)
    (g,) = [i for i in gap.instrs if isinstance(i, (GlobalOp, Compute))]
    m = _instr(mean, GlobalOp)
    assert g.flops == m.flops == 64 * 56 * 56
    rate = t.lanes * 32 * t.clock_mhz * 1e6 * t.efficiency["vector"]
    expected = m.flops / (rate * _fill(64, t.lanes) * _fill(3136, 32))
    assert compute_seconds(t, gap.graph.nodes[0], (1, 64, 1, 1), g.flops) == pytest.approx(expected, rel=1e-12)
    assert compute_seconds(t, mean.graph.nodes[0], (1, 64, 1, 1), m.flops) == pytest.approx(expected, rel=1e-12)


def test_last_axis_mean_without_keepdims_is_global_and_reads_the_whole_input():
    """ReduceMean over the last axis of (2, 100, 256) without keepdims runs global: its compute
    reads the whole input, the 100 rows of each batch over the lanes and the 256 features along
    the EU, as a tile does."""
    t = ob.Target.preset("bm1684")
    prog = ob.compile(_reduce_graph((2, 100, 256), axes=(-1,), keepdims=0), t)
    ins = _instr(prog, GlobalOp)
    assert ins.flops == 2 * 100 * 256
    rate = t.lanes * 32 * t.clock_mhz * 1e6 * t.efficiency["vector"]
    expected = ins.flops / (rate * _fill(100, t.lanes) * _fill(256, 32))
    assert compute_seconds(t, prog.graph.nodes[0], (2, 100), ins.flops) == pytest.approx(expected, rel=1e-12)
