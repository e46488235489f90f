"""Loads overlap the computes of the layers before them inside a one-tile layer group, pinned
by hand (BM1684 preset).

The chip's compiler gives each GDMA transfer of a layer group a time step: a layer's weights
and inputs load in the time step of the layer before it, and the memory-aware pass moves a
load to any earlier time step where GDMA is idle and its local memory is free (TPU-MLIR
``TimeStepMethod::layer_nearest_timestep_assignment`` and ``memory_aware_timestep_assignment``),
in a group of one tile as in a tiled one. The figures below are written out from the preset's
fields and the arithmetic of each op, as in ``test_cost_model.py``:

- a GDMA transfer costs ``gdma_latency_us`` plus its bytes over ``ddr_bandwidth_gbps``;
- a convolution tile costs ``tiu_issue_us`` plus its FLOPs over the f32 multiply-add peak,
  the "conv" / "conv1x1" efficiency and the lane and EU fill (output channels over 64 lanes,
  output pixels over the 32 f32 EUs of a row; BM1684 has no input-channel step);
- an Add tile costs ``tiu_issue_us`` plus one operation per element at ``lanes x 32 x clock``
  times the "vector" efficiency and the same fill.

Every tensor is a multiple of 4 KiB, so no two share a chunk of the DDR the scheduler tracks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opbridge as ob

T = ob.Target.preset("bm1684")
SEC = 1e-6  # one microsecond


def _gdma(nbytes: int) -> float:
    return T.gdma_latency_us * SEC + nbytes / (T.ddr_bandwidth_gbps * 1e9)


def _conv(flops: float, family: str, cout: int, pixels: int) -> float:
    fill = (cout / (-(-cout // 64) * 64)) * (pixels / (-(-pixels // 32) * 32))
    return T.tiu_issue_us * SEC + flops / (T.peak_tflops_f32 * 1e12 * T.efficiency[family] * fill)


def _events(p: Any) -> dict[str, dict]:
    return {e["name"].split(" tile")[0]: e for e in p.events}


def _build(second: str) -> ob.Graph:
    """x (1, 32, 32, 32) -> 3x3 conv to 64 channels -> a 1x1 conv 64 -> 64 ("conv"), or an Add
    of a second input y (1, 64, 32, 32) with the 3x3 conv also a graph output ("add")."""
    rng = np.random.default_rng(0)
    b = ob.GraphBuilder("two")
    x = b.input("x", "f32", (1, 32, 32, 32))
    w1 = b.constant("w1", (rng.standard_normal((64, 32, 3, 3)) * 0.1).astype(np.float32))
    a = b.op("Conv", [x, w1], strides=(1, 1), pads=(1, 1, 1, 1))
    if second == "conv":
        w2 = b.constant("w2", (rng.standard_normal((64, 64, 1, 1)) * 0.1).astype(np.float32))
        b.output(b.op("Conv", [a, w2]))
    else:
        b.output(a)
        b.output(b.op("Add", [a, b.input("y", "f32", (1, 64, 32, 32))]))
    return b.build()


def _one_group(g: ob.Graph) -> tuple[Any, ob.Program]:
    prog = ob.compile(g, T)
    p = prog.profile()
    assert p.num_layer_groups == 1 and len(p.units) == 1 and p.num_tiles == 1
    return p, prog


def test_second_weights_load_while_the_first_layer_computes():
    """A one-tile group of two convolutions: GDMA loads w1 (73,728 bytes), x (131,072), then
    w2 (16,384) while the 3x3 conv computes (37.75 MFLOP: 25.5 us against 0.76 us of w2); the
    1x1 conv (8.39 MFLOP) starts when the 3x3 one ends, and the store of its 262,144 bytes
    follows. The group takes w1 + x + conv3x3 + conv1x1 + store: w2 costs nothing."""
    p, _ = _one_group(_build("conv"))
    w1, x, w2, y = _gdma(73_728), _gdma(131_072), _gdma(16_384), _gdma(262_144)
    c1 = _conv(2.0 * 64 * 1024 * 32 * 9, "conv", 64, 1024)
    c2 = _conv(2.0 * 64 * 1024 * 64, "conv1x1", 64, 1024)
    assert c1 == pytest.approx(1e-6 + 37_748_736 / (2.2e12 * 0.70), rel=1e-12)
    assert 25.4e-6 < c1 < 25.6e-6 and 0.75e-6 < w2 < 0.76e-6
    ev = _events(p)
    start = (T.launch_us + T.sync_us) * SEC
    first = ev["Conv conv_1"]
    assert first["ts"] * SEC == pytest.approx(start + w1 + x, rel=1e-9)
    # w2 is on GDMA while the first conv runs on the lanes
    assert first["ts"] <= ev["load w2"]["ts"] < ev["load w2"]["ts"] + ev["load w2"]["dur"] \
        <= first["ts"] + first["dur"]
    assert p.groups[0].est_ms == pytest.approx((w1 + x + c1 + c2 + y) * 1e3, rel=1e-9)
    assert p.est_latency_ms == pytest.approx((start + w1 + x + c1 + c2 + y) * 1e3, rel=1e-9)


def test_a_later_input_loads_while_a_store_waits():
    """The 3x3 conv's output is a graph output, stored before the Add reads y: the store waits
    for the conv, and y (262,144 bytes, 4.6 us) loads in the idle GDMA time before it instead
    of after it, so the Add starts as soon as the conv ends. The group takes w1 + x + conv +
    max(store a, Add) + store: 2 x 4.6 us of stores, not 3 transfers, after the conv."""
    p, _ = _one_group(_build("add"))
    w1, x, ldy, st = _gdma(73_728), _gdma(131_072), _gdma(262_144), _gdma(262_144)
    c1 = _conv(2.0 * 64 * 1024 * 32 * 9, "conv", 64, 1024)
    add = T.tiu_issue_us * SEC + 64 * 1024 / (64 * 32 * T.clock_mhz * 1e6 * T.efficiency["vector"])
    assert add < st
    ev = _events(p)
    conv = ev["Conv conv_1"]
    start = (T.launch_us + T.sync_us) * SEC
    # y goes to GDMA as soon as x is in, while the conv runs, ahead of the store issued before it
    assert ev["load y"]["ts"] * SEC == pytest.approx(start + w1 + x, rel=1e-9)
    assert ev["load y"]["dur"] * SEC == pytest.approx(ldy, rel=1e-9)
    assert ev["load y"]["ts"] + ev["load y"]["dur"] <= conv["ts"] + conv["dur"] <= ev["store conv_1"]["ts"]
    assert ev["Add add_2"]["ts"] == pytest.approx(conv["ts"] + conv["dur"], rel=1e-9)
    assert p.groups[0].est_ms == pytest.approx((w1 + x + c1 + st + st) * 1e3, rel=1e-9)
