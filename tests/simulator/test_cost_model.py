"""The cost model pinned by hand: one compute-bound and one GDMA-bound layer group per chip.

Every expected figure is written out here from the preset's fields and the arithmetic of the
op (a convolution's multiply-adds, one operation per element of a Relu), not taken from the
cost functions:

- a GDMA transfer costs ``gdma_latency_us`` plus its bytes over ``ddr_bandwidth_gbps``;
- a convolution tile costs ``tiu_issue_us`` plus its FLOPs over the multiply-add peak of its
  dtype, times the preset's ``efficiency`` for its family ("conv" for a 3x3 kernel), times how
  much of the lanes it fills: output channels over the lanes, output pixels over the EU width
  (``eu_bytes / itemsize``), input channels over the channels one step reduces
  (``ic_parallel_bytes / itemsize``, 1 when the chip has none);
- a Relu tile costs ``tiu_issue_us`` plus its elements over the vector rate
  ``lanes * EU * clock``, times the "vector" efficiency and the same lane and EU fill;
- a program starts after ``launch_us``, a unit after ``sync_us``; a one-tile group runs its
  loads, its computes and its store in sequence (each waits for the data the one before writes),
  so its time is their sum.

A layer alone would run as a global layer (a one-op group, as TPU-MLIR runs it), so each group
here is two layers: the convolution and a Relu, two Relus.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import opbridge as ob
from opbridge.simulator.cost import compute_seconds

SIZE = {"f32": 4, "f16": 2}
NP = {"f32": np.float32, "f16": np.float16}


def _fill(used: int, unit: int) -> float:
    return used / (math.ceil(used / unit) * unit)


def _gdma_s(t: ob.Target, transfers: list[int]) -> float:
    return sum(t.gdma_latency_us * 1e-6 + b / (t.ddr_bandwidth_gbps * 1e9) for b in transfers)


def _peak(t: ob.Target, dtype: str) -> float:
    return (t.peak_tflops_f16 if dtype == "f16" else t.peak_tflops_f32) * 1e12


def _eff(t: ob.Target, family: str, dtype: str) -> float:
    return t.efficiency.get(f"{family}/{dtype}", t.efficiency[family])


def _conv_graph(dtype: str) -> ob.Graph:
    rng = np.random.default_rng(0)
    b = ob.GraphBuilder("conv")
    x = b.input("x", dtype, (1, 32, 30, 30))
    w = b.constant("w", (rng.standard_normal((48, 32, 3, 3)) * 0.1).astype(NP[dtype]))
    b.output(b.op("Relu", [b.op("Conv", [x, w], strides=(1, 1), pads=(1, 1, 1, 1))]))
    return b.build()


def _relu_graph() -> ob.Graph:
    b = ob.GraphBuilder("relu")
    b.output(b.op("Relu", [b.op("Relu", [b.input("x", "f32", (1, 40, 50, 50))])]))
    return b.build()


def _relu_s(t: ob.Target, c: int, pixels: int, dtype: str) -> float:
    """A Relu tile on ``c`` channels of ``pixels``: one operation per element."""
    eu = t.eu_bytes // SIZE[dtype]
    rate = t.lanes * eu * t.clock_mhz * 1e6 * _eff(t, "vector", dtype) * _fill(c, t.lanes) * _fill(pixels, eu)
    return t.tiu_issue_us * 1e-6 + c * pixels / rate


def _only_group(prog: ob.Program):
    p = prog.profile()
    assert p.num_layer_groups == 1 and len(p.units) == 1 and p.num_tiles == 1
    return p, p.groups[0]


def _conv_case(t: ob.Target, dtype: str) -> tuple[float, float]:
    """(GDMA seconds, compute seconds) of the 3x3 conv 32 -> 48 on 30x30, pads 1, and the Relu
    after it."""
    size = SIZE[dtype]
    flops = 2 * (48 * 30 * 30) * (32 * 3 * 3)
    assert flops == 24_883_200
    eu = t.eu_bytes // size
    icp = max(1, t.ic_parallel_bytes // size) if t.ic_parallel_bytes else 1
    fill = _fill(48, t.lanes) * _fill(900, eu) * _fill(32, icp)
    compute = t.tiu_issue_us * 1e-6 + flops / (_peak(t, dtype) * _eff(t, "conv", dtype) * fill)
    compute += _relu_s(t, 48, 900, dtype)
    gdma = _gdma_s(t, [48 * 32 * 9 * size, 32 * 900 * size, 48 * 900 * size])
    return gdma, compute


@pytest.mark.parametrize("chip,dtype", [("bm1684", "f32"), ("bm1684x", "f32"), ("bm1684x", "f16")])
def test_conv_group_is_compute_bound_and_pinned(chip, dtype):
    t = ob.Target.preset(chip)
    p, g = _only_group(ob.compile(_conv_graph(dtype), t))
    gdma, compute = _conv_case(t, dtype)
    assert g.gdma_bytes == (48 * 32 * 9 + 32 * 900 + 48 * 900) * SIZE[dtype]
    assert compute > gdma and g.bound == "compute"
    assert g.est_ms == pytest.approx((gdma + compute) * 1e3, rel=1e-9)
    start = (t.launch_us + t.sync_us) * 1e-6
    assert p.est_latency_ms == pytest.approx((start + gdma + compute) * 1e3, rel=1e-9)


def test_bm1684_conv_figure():
    """The BM1684 case in numbers: 2.2 TFLOPS x 0.70 x (48/64) x (900/928) = 1.12 TFLOPS, so
    24.88 MFLOP take 22.2 us plus 1 us issue, the Relu after it 0.05 us plus 1 us; 3 transfers of 13.8, 115.2 and 172.8 KB at
    64 GB/s plus 0.5 us each take 6.86 us."""
    t = ob.Target.preset("bm1684")
    gdma, compute = _conv_case(t, "f32")
    relu = 1e-6 + 48 * 900 / (64 * 32 * 550e6 * t.efficiency["vector"] * 0.75 * 900 / 928)
    assert compute == pytest.approx(1e-6 + 24_883_200 / (2.2e12 * 0.70 * 0.75 * 900 / 928) + relu, rel=1e-12)
    assert gdma == pytest.approx(1.5e-6 + 343_296 / 64e9, rel=1e-12)
    assert 24e-6 < compute < 24.6e-6 and 6.8e-6 < gdma < 6.9e-6
    _, g = _only_group(ob.compile(_conv_graph("f32"), t))
    assert g.est_ms == pytest.approx((gdma + compute) * 1e3, rel=1e-9)


@pytest.mark.parametrize("chip", ["bm1684", "bm1684x"])
def test_relu_group_is_gdma_bound_and_pinned(chip):
    """Two Relus on 40x50x50: one operation per element each on the vector path, two
    transfers of the whole tensor."""
    t = ob.Target.preset(chip)
    p, g = _only_group(ob.compile(_relu_graph(), t))
    elems = 40 * 50 * 50
    compute = 2 * _relu_s(t, 40, 2500, "f32")
    gdma = _gdma_s(t, [elems * 4, elems * 4])
    assert g.gdma_bytes == 2 * elems * 4 == 800_000
    assert gdma > compute and g.bound == "gdma"
    assert g.est_ms == pytest.approx((gdma + compute) * 1e3, rel=1e-9)
    assert p.est_latency_ms == pytest.approx(((t.launch_us + t.sync_us) * 1e-6 + gdma + compute) * 1e3,
                                             rel=1e-9)


def test_pinned_figures_follow_the_target():
    """Half the bandwidth, half the peak, other overheads: the hand formula still holds (the
    model reads the target's fields rather than constants of its own)."""
    base = ob.Target.preset("bm1684")
    slow = ob.Target.preset("bm1684", ddr_bandwidth_gbps=base.ddr_bandwidth_gbps / 2,
                            peak_tflops_f32=base.peak_tflops_f32 / 2, gdma_latency_us=2.0,
                            tiu_issue_us=3.0, sync_us=base.sync_us, launch_us=0.0,
                            efficiency={**base.efficiency, "conv": 0.5})
    p, g = _only_group(ob.compile(_conv_graph("f32"), slow))
    gdma, compute = _conv_case(slow, "f32")
    assert g.est_ms == pytest.approx((gdma + compute) * 1e3, rel=1e-9)
    assert p.est_latency_ms == pytest.approx(g.est_ms + slow.sync_us * 1e-3, rel=1e-9)


def _node(op: str, x_shape, dtype: str, w_shape=None, out_shape=None, group: int = 1):
    """A node as the cost model reads it (op, attrs, input and output values)."""
    x = SimpleNamespace(shape=tuple(x_shape), dtype=dtype)
    ins = [x] if w_shape is None else [x, SimpleNamespace(shape=tuple(w_shape), dtype=dtype)]
    out = SimpleNamespace(shape=tuple(out_shape or x_shape), dtype="i32" if dtype == "i8" else dtype)
    return SimpleNamespace(op=op, attrs={"group": group}, inputs=ins, outputs=[out])


def test_bm1684_int8_packs_four_images():
    """BM1684's 4N int8 layout: a batch-1 tile fills a quarter of the int8 EUs, so it takes
    as long as a batch-4 tile (four times the work); BM1684X has no such packing."""
    node1 = _node("ConvInteger", (1, 64, 28, 28), "i8", (64, 64, 3, 3), (1, 64, 28, 28))
    node4 = _node("ConvInteger", (4, 64, 28, 28), "i8", (64, 64, 3, 3), (4, 64, 28, 28))
    flops1 = 2.0 * 64 * 784 * 576
    t = ob.Target.preset("bm1684")
    one = compute_seconds(t, node1, (1, 64, 28, 28), flops1)
    four = compute_seconds(t, node4, (4, 64, 28, 28), 4 * flops1)
    assert one == pytest.approx(four, rel=1e-12)
    # 17.6 TOPS x the int8 conv efficiency x 1/4 of the batch slots (64 channels; a 4N EU row
    # holds 128 / 4 = 32 pixels, so 784 pixels take 25 rows, 800 slots)
    assert one == pytest.approx(flops1 / (17.6e12 * t.efficiency["conv/i8"] * 0.25 * 784 / 800), rel=1e-12)
    x = ob.Target.preset("bm1684x")
    assert compute_seconds(x, node4, (4, 64, 28, 28), 4 * flops1) == pytest.approx(
        4 * compute_seconds(x, node1, (1, 64, 28, 28), flops1), rel=1e-12)


def test_op_families_use_the_lanes_differently():
    """A first layer's 3 input channels on BM1684X: the 3x3 taps fold into the channels
    (27 of the 32 f16 channels a step reduces) instead of 3 of 32; a depthwise conv runs on
    the vector path (two operations per element per cycle), not at the matrix peak."""
    x = ob.Target.preset("bm1684x")
    first = _node("Conv", (1, 3, 64, 64), "f16", (64, 3, 3, 3), (1, 64, 64, 64))
    flops = 2.0 * 64 * 4096 * 27
    assert compute_seconds(x, first, (1, 64, 64, 64), flops) == pytest.approx(
        flops / (16e12 * x.efficiency["conv/f16"] * 27 / 32), rel=1e-12)
    dw = _node("Conv", (1, 64, 32, 32), "f16", (64, 1, 3, 3), (1, 64, 32, 32), group=64)
    dflops = 2.0 * 64 * 1024 * 9
    assert compute_seconds(x, dw, (1, 64, 32, 32), dflops) == pytest.approx(
        dflops / (2 * 64 * 32 * 1000e6 * x.efficiency["depthwise"]), rel=1e-12)
