"""The int8 cost model pinned by hand: one compute-bound and one GDMA-bound layer group per chip.

Every expected figure is written out here from the preset's fields and the arithmetic of the
op, not taken from the cost functions:

- BM1684 keeps 8-bit activations in its 4N layout (``int8_batch_pack = 4``): GDMA moves whole
  groups of four images (a batch-1 tile moves as many bytes as four images), an EU row holds
  ``eu_bytes / 4`` = 32 pixels of four images each, and a tile of fewer than four images fills
  that share of the slots. BM1684X has no 4N layout: one byte an element, 64 int8 elements an
  EU row (``eu_bytes``), 64 int8 input channels a convolution step (``ic_parallel_bytes``).
- An integer convolution's bias Add, Requantize and ReLU run inside its instruction: they take
  no time of their own.
- A GDMA transfer costs ``gdma_latency_us`` plus its bytes over ``ddr_bandwidth_gbps``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import opbridge as ob
from opbridge.simulator.schema import Compute, Load, Store


def _fill(used: int, unit: int) -> float:
    return used / (math.ceil(used / unit) * unit)


def _gdma_us(t: ob.Target, nbytes: int) -> float:
    return t.gdma_latency_us + nbytes / (t.ddr_bandwidth_gbps * 1e3)


def _qconv_graph(n: int) -> ob.Graph:
    """ConvInteger 3x3, 128 -> 64 channels on 30x30 (pads 1), its i32 bias Add, a per-channel
    Requantize to i8 and a Relu."""
    rng = np.random.default_rng(0)
    b = ob.GraphBuilder("qconv")
    x = b.input("x", "i8", (n, 128, 30, 30))
    w = b.constant("w", rng.integers(-127, 128, (64, 128, 3, 3)).astype(np.int8))
    acc = b.op("ConvInteger", [x, w], pads=(1, 1, 1, 1), strides=(1, 1))
    acc = b.op("Add", [acc, b.constant("bias", rng.integers(-999, 999, (1, 64, 1, 1)).astype(np.int32))])
    q = b.op("Requantize", [acc, b.constant("mult", np.full(64, 1 << 30, np.int32)),
                            b.constant("shift", np.full(64, 8, np.int32))], axis=1, output_dtype="i8")
    b.output(b.op("Relu", [q]))
    return b.build()


def _events(p: ob.Profile, kind: str) -> dict[str, float]:
    """Durations in microseconds of one engine's events, by event name."""
    tid = {"gdma": 1, "tpu": 2}[kind]
    return {e["name"]: e["dur"] for e in p.events if e["tid"] == tid}


# (chip, batch, expected conv compute us): the multiply-add peak x conv efficiency x fill, by hand
def _bm1684_conv_us(n: int) -> float:
    # 17.6 TOPS x 0.62 (conv/i8) x 64/64 lanes x 900/928 pixels (32 a 4N row) x n/4 images of
    # the pack
    flops = 2 * 64 * 900 * 128 * 9 * n
    return 1.0 + flops / (17.6e12 * 0.62 * (900 / 928) * (n / 4)) * 1e6


def _bm1684x_conv_us(n: int) -> float:
    # 32 TOPS x 0.77 (conv/i8) x 64/64 lanes x 900/960 pixels (64 a row) x 128/128 input
    # channels (two steps of 64)
    flops = 2 * 64 * 900 * 128 * 9 * n
    return 1.0 + flops / (32e12 * 0.77 * (900 / 960)) * 1e6


@pytest.mark.parametrize("chip,n,conv_us,x_bytes,y_bytes", [
    ("bm1684", 1, _bm1684_conv_us(1), 4 * 128 * 900, 4 * 64 * 900),
    ("bm1684", 4, _bm1684_conv_us(4), 4 * 128 * 900, 4 * 64 * 900),
    ("bm1684x", 4, _bm1684x_conv_us(4), 4 * 128 * 900, 4 * 64 * 900),
])
def test_int8_conv_group_is_compute_bound_and_pinned(chip, n, conv_us, x_bytes, y_bytes):
    t = ob.Target.preset(chip)
    prog = ob.compile(_qconv_graph(n), t)
    p = prog.profile()
    assert len(p.units) == 1 and p.num_tiles == 1
    (g,) = p.groups
    loads = {i.tensor: i.bytes for i in prog.instrs if isinstance(i, Load)}
    stores = [i.bytes for i in prog.instrs if isinstance(i, Store)]
    # the weights at one byte, bias / multiplier / shift at four, activations at their 8-bit size
    # (whole packs of four images on BM1684: batch 1 moves the bytes of four)
    assert loads == {"w": 64 * 128 * 9, "bias": 64 * 4, "mult": 64 * 4, "shift": 64 * 4, "x": x_bytes}
    assert stores == [y_bytes]
    tpu = _events(p, "tpu")
    conv = [d for k, d in tpu.items() if k.startswith("ConvInteger")]
    assert conv == [pytest.approx(conv_us, rel=1e-9)]
    # the epilogue rides on the convolution's instruction
    assert sorted(k.split()[0] for k, d in tpu.items() if d == 0.0) == ["Add", "Relu", "Requantize"]
    gdma = _events(p, "gdma")
    for name, nbytes in [("load w", loads["w"]), ("load x", x_bytes), ("store relu_4", y_bytes)]:
        assert gdma[name] == pytest.approx(_gdma_us(t, nbytes), rel=1e-9)
    assert g.bound == "compute"
    # the convolution waits for its weights and input, the store for the convolution; the
    # epilogue's constants load on the way (at most all of them ahead of it)
    low = _gdma_us(t, loads["w"]) + _gdma_us(t, x_bytes) + conv_us + _gdma_us(t, y_bytes)
    high = low + sum(_gdma_us(t, loads[k]) for k in ("bias", "mult", "shift"))
    assert low * 1e-3 - 1e-12 <= g.est_ms <= high * 1e-3 + 1e-12


def test_bm1684_int8_batch_one_costs_as_much_as_batch_four():
    """The 4N layout in numbers: a batch-1 int8 convolution takes as long as a batch-4 one
    (a quarter of the int8 slots), 50.2 us for 132.7 MOP: 17.6 TOPS x 0.62 x 0.970 x 0.25
    = 2.65 TOPS."""
    one, four = ([d for k, d in _events(ob.compile(_qconv_graph(n), "bm1684").profile(), "tpu").items()
                  if k.startswith("ConvInteger")] for n in (1, 4))
    assert one == pytest.approx(four, rel=1e-12) and len(one) == 1
    assert one[0] == pytest.approx(_bm1684_conv_us(1), rel=1e-9) and 50.1 < one[0] - 1.0 < 50.2


def _max_graph(n: int) -> ob.Graph:
    """The int8 ReLU spelt as ONNX quantized graphs have it, Max with the zero point, twice (one
    alone would be a one-op group, which runs as a global layer)."""
    b = ob.GraphBuilder("qrelu")
    x = b.input("x", "i8", (n, 40, 50, 50))
    zp = b.constant("zp", np.array(0, np.int8))
    b.output(b.op("Max", [b.op("Max", [x, zp]), zp]))
    return b.build()


@pytest.mark.parametrize("chip", ["bm1684", "bm1684x"])
def test_int8_elementwise_group_is_gdma_bound_and_pinned(chip):
    """Two Max on a batch-1 int8 40x50x50 tensor: one operation per element each on the vector
    path; BM1684 moves and computes it as a pack of four images."""
    t = ob.Target.preset(chip)
    prog = ob.compile(_max_graph(1), t)
    p = prog.profile()
    (g,) = p.groups
    elems = 40 * 50 * 50
    comps = [i for i in prog.instrs if isinstance(i, Compute)]
    assert [c.flops for c in comps] == [elems, elems]
    if chip == "bm1684":
        # 64 lanes x 128 int8 elements x 550 MHz; 40/64 lanes, 2500 of 2528 pixels (32 a row),
        # one image of four
        x_bytes = 4 * elems
        rate = 64 * 128 * 550e6 * (40 / 64) * (2500 / 2528) * (1 / 4)
    else:
        # 64 lanes x 64 int8 elements x 1000 MHz; 40/64 lanes, 2500 of 2560 pixels
        x_bytes = elems
        rate = 64 * 64 * 1000e6 * (40 / 64) * (2500 / 2560)
    compute_us = 2 * (1.0 + elems / rate * 1e6)
    gdma_us = _gdma_us(t, 1) + 2 * _gdma_us(t, x_bytes)  # the zero point, the input, the output
    assert g.gdma_bytes == 1 + 2 * x_bytes
    assert gdma_us > compute_us and g.bound == "gdma"
    # one tile: its loads, its compute and its store in sequence
    assert g.est_ms == pytest.approx((gdma_us + compute_us) * 1e-3, rel=1e-9)
    start = t.launch_us + t.sync_us
    assert p.est_latency_ms == pytest.approx((start + gdma_us + compute_us) * 1e-3, rel=1e-9)


def _epilogue_graph(extra_output: str | None) -> ob.Graph:
    """The convolution of :func:`_qconv_graph` with its epilogue, and optionally one of its
    values a graph output too (a second reader the fused instruction would have to write)."""
    rng = np.random.default_rng(1)
    b = ob.GraphBuilder("qconv")
    x = b.input("x", "i8", (1, 16, 6, 6))
    acc = b.op("ConvInteger", [x, b.constant("w", rng.integers(-127, 128, (8, 16, 3, 3)).astype(np.int8))],
               pads=(1, 1, 1, 1), strides=(1, 1))
    biased = b.op("Add", [acc, b.constant("bias", np.zeros((1, 8, 1, 1), np.int32))])
    q = b.op("Requantize", [biased, b.constant("mult", np.full(8, 1 << 30, np.int32)),
                            b.constant("shift", np.full(8, 8, np.int32))], axis=1, output_dtype="i8")
    b.output(b.op("Relu", [q]))
    if extra_output is not None:
        b.output({"acc": acc, "q": q}[extra_output])
    return b.build()


@pytest.mark.parametrize("extra_output,fused_ops", [
    (None, ["Add", "Requantize", "Relu"]),   # the whole chain rides on the convolution
    ("q", ["Add", "Requantize"]),            # the 8-bit result is read twice: the Relu runs alone
    ("acc", []),                             # the i32 accumulator leaves the lanes: nothing fuses
], ids=["chain", "q-is-output", "acc-is-output"])
def test_graph_facts_name_the_fused_epilogue(extra_output, fused_ops):
    """``graph_facts`` finds, once per graph, the epilogue ops each integer convolution's
    instruction runs (bias Add, Requantize, ReLU, each the only reader of the value before it,
    which is no graph output) and the value that instruction then writes."""
    from opbridge.simulator.cost import graph_facts

    g = _epilogue_graph(extra_output)
    facts = graph_facts(g)
    assert facts.graph is g
    assert facts.nodes == {n.name: n for n in g.nodes}
    conv = next(n for n in g.nodes if n.op == "ConvInteger")
    assert sorted(g.node(n).op for n in facts.fused) == sorted(fused_ops)
    assert set(facts.fused.values()) <= {conv.name}
    if fused_ops:
        last = next(n for n in reversed(g.nodes) if n.op == fused_ops[-1])
        assert facts.epilogue_out == {conv.name: last.outputs[0]}
    else:
        assert facts.epilogue_out == {}


def test_profile_refuses_the_facts_of_another_graph():
    from opbridge.simulator.cost import graph_facts, profile

    prog = ob.compile(_qconv_graph(1), "bm1684x")
    with pytest.raises(ValueError, match="graph facts are of graph"):
        profile(prog, graph_facts(_qconv_graph(1)))


def test_int8_layers_run_global_estimated_with_their_epilogue_fused():
    """The unit estimator (the graph's facts found once, when it is made, and shared by its
    estimates) on the integer convolution and its epilogue as four global layers, and on the
    convolution alone: it reads x and w and writes the epilogue's 8-bit result, not its i32
    accumulator, in one transfer set-up, the longer of that traffic and its compute, also
    when the epilogue is in no unit of the estimate; the Add, Requantize and Relu move and
    compute nothing, each only a unit launched a sync after the one before."""
    import dataclasses

    from opbridge.simulator.compiler import unit_estimator
    from opbridge.simulator.lower import lower

    t = ob.Target.preset("bm1684x")
    g = _qconv_graph(1)
    alone = [dataclasses.replace(ln, local=False) for ln in lower(g)]
    assert [ln.node.op for ln in alone] == ["ConvInteger", "Add", "Requantize", "Relu"]
    nbytes = 128 * 900 + 64 * 128 * 9 + 64 * 900  # x, w and the i8 output, one byte each
    conv_us = _bm1684x_conv_us(1) - t.tiu_issue_us  # a global layer pays no per-instruction issue
    traffic_us = nbytes / (t.ddr_bandwidth_gbps * 1e3)
    assert traffic_us < conv_us < traffic_us + 64 * 900 * 3 / (t.ddr_bandwidth_gbps * 1e3)  # i32: slower
    want_us = t.launch_us + 4 * t.sync_us + t.gdma_latency_us + max(traffic_us, conv_us)
    estimate = unit_estimator(g, t)
    assert estimate(alone) == pytest.approx(want_us * 1e-3, rel=1e-9)
    assert estimate(alone[:1]) == pytest.approx((want_us - 3 * t.sync_us) * 1e-3, rel=1e-9)
