"""The cost model pinned by hand: one compute-bound and one GDMA-bound layer group.

Every expected figure is written out here from the target's fields and the arithmetic of the
op (a convolution's multiply-adds, one operation per element of a Relu), not taken from the
cost functions: a GDMA transfer costs ``gdma_latency_us`` plus its bytes over
``ddr_bandwidth_gbps``; a tile's compute costs its FLOPs over the f32 peak scaled by how much
of the lanes it fills, ``(C / (ceil(C / lanes) * lanes)) * (H*W / align(H*W, EU))`` with
``EU = eu_bytes / 4`` for f32. A one-tile group runs load -> compute -> store in sequence
(each waits for the data the previous one writes), so its time is the sum.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import opbridge as ob

F32 = 4


def _fill(target: ob.Target, c: int, h: int, w: int) -> float:
    """The fraction of the lanes' EUs a (., c, h, w) f32 tile keeps busy."""
    eu = target.eu_bytes // F32
    lanes_used = c / (math.ceil(c / target.lanes) * target.lanes)
    plane_used = h * w / (math.ceil(h * w / eu) * eu)
    return lanes_used * plane_used


def _gdma_seconds(target: ob.Target, transfers: list[int]) -> float:
    return sum(target.gdma_latency_us * 1e-6 + b / (target.ddr_bandwidth_gbps * 1e9) for b in transfers)


def _conv_graph() -> ob.Graph:
    rng = np.random.default_rng(0)
    b = ob.GraphBuilder("conv")
    x = b.input("x", "f32", (1, 32, 30, 30))
    w = b.constant("w", (rng.standard_normal((48, 32, 3, 3)) * 0.1).astype(np.float32))
    b.output(b.op("Conv", [x, w], strides=(1, 1), pads=(1, 1, 1, 1)))
    return b.build()


def _relu_graph() -> ob.Graph:
    b = ob.GraphBuilder("relu")
    b.output(b.op("Relu", [b.input("x", "f32", (1, 40, 50, 50))]))
    return b.build()


@pytest.fixture(scope="module")
def target() -> ob.Target:
    return ob.Target.preset("bm1684")


def _only_group(prog: ob.Program):
    p = prog.profile()
    assert p.num_layer_groups == 1 and len(p.units) == 1 and p.num_tiles == 1
    return p, p.groups[0]


def test_conv_group_is_compute_bound_and_pinned(target):
    """3x3 conv, 32 -> 48 channels on 30x30 with pads 1: 2 FLOPs per tap per output."""
    p, g = _only_group(ob.compile(_conv_graph(), target))
    flops = 2 * (48 * 30 * 30) * (32 * 3 * 3)
    x_bytes, w_bytes, y_bytes = 32 * 30 * 30 * F32, 48 * 32 * 3 * 3 * F32, 48 * 30 * 30 * F32
    gdma_s = _gdma_seconds(target, [w_bytes, x_bytes, y_bytes])
    compute_s = flops / (target.peak_tflops_f32 * 1e12 * _fill(target, 48, 30, 30))
    assert flops == 24_883_200
    assert g.flops == pytest.approx(flops, rel=1e-12)
    assert g.gdma_bytes == x_bytes + w_bytes + y_bytes == 343_296
    assert compute_s > gdma_s and g.bound == "compute"
    assert g.est_ms == pytest.approx((gdma_s + compute_s) * 1e3, rel=1e-9)
    assert p.est_latency_ms == pytest.approx((gdma_s + compute_s) * 1e3, rel=1e-9)
    assert p.gdma_bytes == 343_296 and p.flops == pytest.approx(flops, rel=1e-12)


def test_relu_group_is_gdma_bound_and_pinned(target):
    """Relu on 40x50x50: one operation per element, two transfers of the whole tensor."""
    p, g = _only_group(ob.compile(_relu_graph(), target))
    elems = 40 * 50 * 50
    gdma_s = _gdma_seconds(target, [elems * F32, elems * F32])
    compute_s = elems / (target.peak_tflops_f32 * 1e12 * _fill(target, 40, 50, 50))
    assert g.flops == pytest.approx(elems, rel=1e-12)
    assert g.gdma_bytes == 2 * elems * F32 == 800_000
    assert gdma_s > compute_s and g.bound == "memory"
    assert g.est_ms == pytest.approx((gdma_s + compute_s) * 1e3, rel=1e-9)
    assert p.est_latency_ms == pytest.approx((gdma_s + compute_s) * 1e3, rel=1e-9)


def test_pinned_figures_follow_the_target(target):
    """Half the bandwidth and half the peak: the hand formula still holds (the model reads
    the target's fields rather than constants of its own)."""
    slow = ob.Target.preset("bm1684", ddr_bandwidth_gbps=target.ddr_bandwidth_gbps / 2,
                            peak_tflops_f32=target.peak_tflops_f32 / 2, gdma_latency_us=2.0)
    _, g = _only_group(ob.compile(_conv_graph(), slow))
    flops = 2 * (48 * 30 * 30) * (32 * 3 * 3)
    gdma_s = _gdma_seconds(slow, [48 * 32 * 9 * F32, 32 * 900 * F32, 48 * 900 * F32])
    compute_s = flops / (slow.peak_tflops_f32 * 1e12 * _fill(slow, 48, 30, 30))
    assert g.est_ms == pytest.approx((gdma_s + compute_s) * 1e3, rel=1e-9)
