"""Int8 sizes on the simulated BM1684: the 4N local-memory layout, GDMA bytes, how much a
group holds, and the int8 peak in the cost model.

The expected sizes follow TPU-MLIR's BM1684 backend (sophgo/tpu-mlir, commit
015442ac4a6528730d57e9cdc36a7c6d85d76b3f): the BM1684 constructor sets ``ALIGN_4N = true``
(``include/tpu_mlir/Backend/BM168x/BM1684.h``), under which ``Arch::get_tensor_lmem_bytes``
gives an 8-bit activation ``ceil(n / 4) * ceil(c / NPU_NUM) * align(h * w, EU_BYTES / 4) * 4``
bytes per lane and ``Arch::get_gmem_bytes`` ``ceil(n / 4) * 4 * c * h * w`` bytes, weights
keeping their plain size (``lib/Backend/Arch.cpp``). The formulas are written out here, not
taken from the simulator.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import opbridge as ob
from opbridge.ir.ops.quant import quantize_multiplier
from opbridge.simulator import Compute, Load, Store
from opbridge.simulator.layergroup import GroupCandidate
from opbridge.simulator.lower import lower
from opbridge.simulator.memory import activation_lane_bytes

LMEM = 8192


def _tpu_mlir_lmem_4n(n: int, c: int, h: int, w: int) -> int:
    return math.ceil(n / 4) * math.ceil(c / 64) * (math.ceil(h * w / 32) * 32) * 4


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
def test_int8_tile_takes_the_4n_footprint(n: int) -> None:
    t = ob.Target.preset("bm1684")
    for c, h, w in ((3, 7, 5), (64, 16, 16), (130, 3, 33)):
        assert activation_lane_bytes(t, (n, c, h, w), "i8") == _tpu_mlir_lmem_4n(n, c, h, w)
        assert activation_lane_bytes(t, (n, c, h, w), "u8") == _tpu_mlir_lmem_4n(n, c, h, w)
        # f32 keeps its layout: n items, EU of 32 elements
        assert activation_lane_bytes(t, (n, c, h, w), "f32") == (
            n * math.ceil(c / 64) * (math.ceil(h * w / 32) * 32) * 4)


def test_without_a_batch_pack_an_int8_tile_is_one_byte_an_element() -> None:
    """The bm1684x has no 4N layout (``int8_batch_pack`` 1): an int8 tile is one byte an
    element, EU of eu_bytes elements."""
    t = ob.Target.preset("bm1684x")
    assert t.int8_batch_pack == 1
    assert activation_lane_bytes(t, (3, 70, 5, 5), "i8") == 3 * 2 * 64


# -- the same CNN in int8 and in f32 ------------------------------------------------------------
def _int8_core(n: int, c: int, h: int, w: int) -> ob.Graph:
    """i8 in -> ConvInteger + i32 bias -> Requantize -> Relu -> MaxPool -> i8 out."""
    rng = np.random.default_rng(0)
    b = ob.GraphBuilder("int8_core")
    x = b.input("x", "i8", (n, c, h, w))
    a = b.op("ConvInteger", [x, b.constant("w", rng.integers(-127, 128, (32, c, 3, 3)).astype(np.int8))],
             pads=(1, 1, 1, 1))
    a = b.op("Add", [a, b.constant("b", rng.integers(-999, 999, (1, 32, 1, 1)).astype(np.int32))])
    m, s = quantize_multiplier(np.full(32, 1e-3))
    y = b.op("Requantize", [a, b.constant("m", m), b.constant("s", s)], output_dtype="i8")
    b.output(b.op("MaxPool", [b.op("Relu", [y])], kernel_shape=(2, 2), strides=(2, 2)))
    return b.build()


def _float_core(n: int, c: int, h: int, w: int) -> ob.Graph:
    rng = np.random.default_rng(0)
    b = ob.GraphBuilder("float_core")
    x = b.input("x", "f32", (n, c, h, w))
    y = b.op("Conv", [x, b.constant("w", rng.normal(size=(32, c, 3, 3)).astype(np.float32)),
                      b.constant("b", rng.normal(size=32).astype(np.float32))], pads=(1, 1, 1, 1))
    b.output(b.op("MaxPool", [b.op("Relu", [y])], kernel_shape=(2, 2), strides=(2, 2)))
    return b.build()


def _traffic(prog: ob.Program) -> tuple[int, int]:
    """GDMA bytes of (activations, weights) over the program's loads and stores."""
    act = wts = 0
    for ins in prog.instrs:
        if isinstance(ins, (Load, Store)):
            if isinstance(ins, Load) and ins.const:
                wts += ins.bytes
            else:
                act += ins.bytes
    return act, wts


def test_int8_gdma_moves_whole_groups_of_four_images() -> None:
    """Every load and store of an int8 activation moves ceil(n / 4) * 4 bytes per (c, h, w)
    element of its slice, whatever its batch range."""
    prog = ob.compile(_int8_core(3, 16, 40, 24), target=ob.Target.preset("bm1684", lmem_bytes_per_lane=LMEM))
    moved = 0
    for ins in prog.instrs:
        if isinstance(ins, Load) and not ins.const:
            n, h = ins.n[1] - ins.n[0], ins.h[1] - ins.h[0]
            assert ins.bytes == math.ceil(n / 4) * 4 * 16 * h * 24, ins
            moved += 1
        elif isinstance(ins, Store):
            n, h = ins.n[1] - ins.n[0], ins.h[1] - ins.h[0]
            assert ins.bytes == math.ceil(n / 4) * 4 * 32 * h * 12, ins
            moved += 1
    assert moved > 2


def _bytes_per_row(prog: ob.Program, tensor: str) -> float:
    """GDMA bytes per row of ``tensor`` over its loads (or stores), halo rows included."""
    moves = [i for i in prog.instrs if isinstance(i, (Load, Store)) and i.tensor == tensor]
    assert moves, tensor
    return sum(i.bytes for i in moves) / sum(i.h[1] - i.h[0] for i in moves)


@pytest.mark.parametrize("batch", [1, 4], ids=["n=1", "n=4"])
def test_int8_program_moves_fewer_bytes_than_float(batch: int) -> None:
    """A row of an int8 activation moves a quarter of an f32 row's bytes at batch 4 and as
    many at batch 1 (the 4N layout pads every element to four bytes); int8 weights are a
    quarter of f32's either way, so the int8 program moves fewer bytes in all."""
    t = ob.Target.preset("bm1684", lmem_bytes_per_lane=LMEM)
    shape = (batch, 16, 40, 24)
    pi, pf = ob.compile(_int8_core(*shape), target=t), ob.compile(_float_core(*shape), target=t)
    ratio = 4 if batch == 4 else 1
    assert _bytes_per_row(pi, "x") * ratio == _bytes_per_row(pf, "x") == batch * 16 * 24 * 4
    out_i, out_f = pi.graph.outputs[0].name, pf.graph.outputs[0].name
    assert _bytes_per_row(pi, out_i) * ratio == _bytes_per_row(pf, out_f) == batch * 32 * 12 * 4
    conv_w = [ins.bytes for ins in pi.instrs if isinstance(ins, Load) and ins.tensor == "w"]
    assert conv_w == [32 * 16 * 9]
    assert [ins.bytes for ins in pf.instrs if isinstance(ins, Load) and ins.tensor == "w"] == [4 * 32 * 16 * 9]
    (ai, wi), (af, wf) = _traffic(pi), _traffic(pf)
    assert wi < wf and (ai < af if batch == 4 else ai >= af), (ai, af)
    assert pi.profile().gdma_bytes < pf.profile().gdma_bytes


@pytest.mark.parametrize("batch", [1, 4], ids=["n=1", "n=4"])
def test_int8_group_holds_more_images_per_tile(batch: int) -> None:
    """At batch 4 an int8 tile of four images takes one f32 image's local memory: the int8
    tensors of the single-buffered group take a quarter of their f32 counterparts' bytes per
    row, and the group needs no more row cuts than the float one (its i32 accumulator is as
    big as the f32 convolution output, so that is where the two peak); at batch 1 the 4N
    layout pads every int8 element to four bytes."""
    t = ob.Target.preset("bm1684", lmem_bytes_per_lane=LMEM)
    shape = (batch, 16, 40, 24)
    plans = []
    for g in (_int8_core(*shape), _float_core(*shape)):
        p = GroupCandidate(lower(g), {v.name for v in g.outputs}).best(t)
        assert p is not None and p.n_per == batch
        plans.append(p)
    pi, pf = plans
    assert pi.k <= pf.k, (pi.k, pf.k)
    ratio = 4 if batch == 4 else 1
    for name_i, name_f in (("x", "x"), (pi.outputs[0].name, pf.outputs[0].name)):
        rows_i = max(tile.rows[name_i][1] - tile.rows[name_i][0] for tile in pi.tiles)
        rows_f = max(tile.rows[name_f][1] - tile.rows[name_f][0] for tile in pf.tiles)
        per_row_i, per_row_f = pi.alloc[name_i][1] / rows_i, pf.alloc[name_f][1] / rows_f
        assert per_row_i * ratio == pytest.approx(per_row_f, rel=0.15), (name_i, per_row_i, per_row_f)
    rows = max(tile.rows["x"][1] - tile.rows["x"][0] for tile in pi.tiles)
    assert pi.alloc["x"][1] == _tpu_mlir_lmem_4n(batch, 16, rows, 24)


def test_int8_convolution_is_charged_at_the_int8_peak() -> None:
    """The same convolution tile costs the int8 program a fraction of the f32 one's time on
    the lanes (the cost model's int8 peak is 8x the f32 one on the bm1684)."""
    t = ob.Target.preset("bm1684", lmem_bytes_per_lane=LMEM)
    times = {}
    for name, g in (("i8", _int8_core(4, 16, 40, 24)), ("f32", _float_core(4, 16, 40, 24))):
        prog = ob.compile(g, target=t)
        p = prog.profile()
        computes = [i for i in prog.instrs if isinstance(i, Compute)]
        durs = [e["dur"] for e in p.events if e["cat"] == "compute"]
        assert len(durs) == len(computes)
        times[name] = sum(d for i, d in zip(computes, durs) if prog.graph.node(i.node).op in ("ConvInteger", "Conv"))
    assert times["i8"] < times["f32"] / 2, times


@pytest.mark.parametrize("batch", [6, 8])
def test_int8_tiles_take_whole_groups_of_four_images(batch: int) -> None:
    """A tile of an int8 group starts at a multiple of four batch items (it never splits a
    32-bit element of the 4N layout), where a float group may take one image a tile."""
    t = ob.Target.preset("bm1684", lmem_bytes_per_lane=2048)
    prog = ob.compile(_int8_core(batch, 16, 16, 24), target=t)
    starts = {ins.n[0] for ins in prog.instrs if isinstance(ins, Load) and not ins.const}
    assert starts == {0, 4}, starts
    x = np.random.default_rng(0).integers(-128, 128, (batch, 16, 16, 24)).astype(np.int8)
    name = prog.graph.outputs[0].name
    np.testing.assert_array_equal(prog.run({"x": x})[name], ob.interpret(prog.graph, {"x": x})[name])
    fprog = ob.compile(_float_core(batch, 16, 16, 24), target=t)
    assert {ins.n[0] for ins in fprog.instrs if isinstance(ins, Load) and not ins.const} - {0, 4}


def test_int8_compute_fills_four_images_per_element() -> None:
    """An int8 convolution computes four 4N-packed images at once: at batch 1 a tile keeps a
    quarter of those slots busy, so its time per image is four times batch 4's."""
    t = ob.Target.preset("bm1684")
    per_image = {}
    for n in (1, 4):
        prog = ob.compile(_int8_core(n, 16, 16, 24), target=t)
        computes = [i for i in prog.instrs if isinstance(i, Compute)]
        durs = [e["dur"] for e in prog.profile().events if e["cat"] == "compute"]
        (conv,) = [d for i, d in zip(computes, durs) if prog.graph.node(i.node).op == "ConvInteger"]
        per_image[n] = (conv - t.tiu_issue_us) / n
    assert per_image[1] == pytest.approx(4 * per_image[4], rel=1e-6)


#: (output channels, kernel, stride) of a VGG/ResNet-like stack at 224 x 224
STACK = [(64, 7, 2), (64, 3, 1), (64, 3, 1), (128, 3, 2), (128, 3, 1), (256, 3, 2), (256, 3, 1),
         (512, 3, 2), (512, 3, 1)]


def _stack(n: int, int8: bool) -> ob.Graph:
    rng = np.random.default_rng(0)
    b = ob.GraphBuilder("stack")
    x = b.input("x", "f32", (n, 3, 224, 224))
    h = b.op("QuantizeLinear", [x, b.constant("sx", np.array(0.02, np.float32))],
             output_dtype="i8") if int8 else x
    c = 3
    for i, (m, k, s) in enumerate(STACK):
        conv = dict(pads=(k // 2,) * 4, strides=(s, s))
        if int8:
            a = b.op("ConvInteger", [h, b.constant(f"w{i}", rng.integers(-127, 128, (m, c, k, k)).astype(np.int8))],
                     **conv)
            a = b.op("Add", [a, b.constant(f"b{i}", np.zeros((1, m, 1, 1), np.int32))])
            mult, shift = quantize_multiplier(np.full(m, 1e-4))
            h = b.op("Requantize", [a, b.constant(f"m{i}", mult), b.constant(f"s{i}", shift)], output_dtype="i8")
        else:
            h = b.op("Conv", [h, b.constant(f"w{i}", np.ones((m, c, k, k), np.float32)),
                              b.constant(f"b{i}", np.zeros(m, np.float32))], **conv)
        h = b.op("Relu", [h])
        if i == 0:
            h = b.op("MaxPool", [h], kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))
        c = m
    if int8:
        h = b.op("DequantizeLinear", [h, b.constant("sy", np.array(0.1, np.float32))])
    b.output(h)
    return b.build()


@pytest.mark.parametrize("batch", [1, 4], ids=["n=1", "n=4"])
def test_int8_network_needs_fewer_tiles_and_bytes_on_the_bm1684(batch: int, monkeypatch) -> None:
    """On the bm1684's own 512 KiB lanes the int8 stack needs fewer tiles than the f32 one and
    moves at most 40% of its GDMA bytes (weights a quarter; activations a quarter per image at
    batch 4, as many bytes at batch 1), and is estimated faster. Both are partitioned as the
    groups grow (the layouts' footprints decide), without the group-or-global choice."""
    import opbridge.simulator.compiler as compiler

    monkeypatch.setattr(compiler, "unit_estimator", lambda graph, target: None)
    pf, pi = (ob.compile(_stack(batch, q)).profile() for q in (False, True))
    assert pi.num_tiles < pf.num_tiles and pi.num_global_layers == pf.num_global_layers == 0
    assert pi.gdma_bytes < 0.4 * pf.gdma_bytes, (pi.gdma_bytes, pf.gdma_bytes)
    assert pi.est_latency_ms < pf.est_latency_ms
