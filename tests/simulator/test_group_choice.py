"""A layer group of one tile is kept only when the cost model estimates it faster than its
layers run another way: all of them as global layers, or the first one global and the rest a
group (TPU-MLIR's group search compares the cycles of candidate groups, a layer alone costed as
a global layer: ``GroupMethod::dynamic_programming_kernel`` in
``lib/Dialect/Tpu/Transforms/LayerGroup/GroupMethod.cpp``).

The figures are written out from the bm1684 preset's fields, as in ``test_cost_overlap.py``:

- a GDMA transfer costs ``gdma_latency_us`` plus its bytes over ``ddr_bandwidth_gbps``;
- a compute on the lanes costs ``tiu_issue_us`` plus its FLOPs over the f32 peak (vector ops:
  ``lanes x 32 x clock``) times the family's efficiency and the fill (channels over 64 lanes,
  pixels over the 32 f32 EUs of a row);
- a global layer costs one transfer set-up plus the longer of its traffic (inputs, weights,
  output) and its compute; every unit starts ``sync_us`` after the one before it, the first
  ``launch_us + sync_us`` after the start.

Every case also runs and equals onnxruntime: where a layer runs does not change its result.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
import opbridge.simulator.compiler as compiler
from opbridge.simulator import GlobalUnit, GroupUnit

from ..conftest import requires_ort
from .helpers import check_run_against_onnxruntime

T = ob.Target.preset("bm1684")
SEC = 1e-6
BW = T.ddr_bandwidth_gbps * 1e9


def _gdma(nbytes: int) -> float:
    return T.gdma_latency_us * SEC + nbytes / BW


def _fill(used: int, unit: int) -> float:
    return used / (-(-used // unit) * unit)


def _conv1x1(cin: int, cout: int, pixels: int) -> float:
    """The lanes' time of a 1x1 convolution without its issue cost."""
    flops = 2.0 * cout * pixels * cin
    return flops / (T.peak_tflops_f32 * 1e12 * T.efficiency["conv1x1"] * _fill(cout, 64) * _fill(pixels, 32))


def _relu(channels: int, pixels: int) -> float:
    return channels * pixels / (64 * 32 * T.clock_mhz * 1e6 * T.efficiency.get("vector", 1.0)
                                * _fill(channels, 64) * _fill(pixels, 32))


def _model(convs: list[tuple[int, int]], x_shape: tuple[int, ...]) -> onnx.ModelProto:
    """x -> 1x1 convolutions (cin, cout) one after the other -> Relu -> y."""
    rng = np.random.default_rng(3)
    nodes, inits, prev = [], [], "x"
    for i, (cin, cout) in enumerate(convs):
        w = (rng.standard_normal((cout, cin, 1, 1)) * 0.05).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], kernel_shape=[1, 1]))
        prev = f"c{i}"
    nodes.append(helper.make_node("Relu", [prev], ["y"]))
    graph = helper.make_graph(nodes, "choice", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                              list(x_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _compile(model: onnx.ModelProto, weigh: bool = True) -> ob.Program:
    g = ob.convert(model)
    if weigh:
        return ob.compile(g, T)
    saved = compiler.unit_estimator
    compiler.unit_estimator = lambda graph, target: None  # the partition as it grows groups
    try:
        return ob.compile(g, T)
    finally:
        compiler.unit_estimator = saved


def _ops(prog: ob.Program, u) -> list[str]:
    return [prog.graph.node(n).op for n in u.nodes]


@requires_ort
def test_one_tile_group_with_large_weights_runs_global():
    """x (1, 1024, 8, 8) -> 1x1 conv to 2048 channels (8 MiB of f32 weights) -> Relu. As one
    group of one tile, GDMA loads the weights (131 us) and x before the conv (136 us) can
    start, then the Relu runs and y is stored: w + x + conv + Relu + store. As global layers
    the conv streams its weights under its compute (one set-up, 9.2 MB of traffic) and the
    Relu follows a sync later: about 70 us less, so both run global."""
    w, x, y = 2048 * 1024 * 4, 1024 * 64 * 4, 2048 * 64 * 4
    issue = T.tiu_issue_us * SEC
    conv = _conv1x1(1024, 2048, 64)
    group = _gdma(w) + _gdma(x) + issue + conv + issue + _relu(2048, 64) + _gdma(y)
    conv_g = T.gdma_latency_us * SEC + max((x + w + y) / BW, conv)
    relu_g = T.gdma_latency_us * SEC + max(2 * y / BW, _relu(2048, 64))
    alone = conv_g + T.sync_us * SEC + relu_g
    assert alone < group - 20 * SEC
    start = (T.launch_us + T.sync_us) * SEC

    model = _model([(1024, 2048)], (1, 1024, 8, 8))
    prog = _compile(model)
    assert [type(u) for u in prog.units] == [GlobalUnit, GlobalUnit]
    assert prog.profile().est_latency_ms == pytest.approx((start + alone) * 1e3, rel=1e-9)
    check_run_against_onnxruntime(model, prog)

    grown = _compile(model, weigh=False)
    assert [type(u) for u in grown.units] == [GroupUnit] and grown.num_tiles == 1
    assert grown.profile().est_latency_ms == pytest.approx((start + group) * 1e3, rel=1e-9)


@requires_ort
def test_group_with_small_weights_is_kept():
    """x (1, 64, 16, 16) -> 1x1 conv 64 -> 64 (16 KiB of weights) -> Relu: as a group the
    conv's output never leaves local memory; run global it would be stored and loaded again,
    a sync later, so the group (estimated by hand below) is kept."""
    w, x, y = 64 * 64 * 4, 64 * 256 * 4, 64 * 256 * 4
    issue = T.tiu_issue_us * SEC
    group = _gdma(w) + _gdma(x) + issue + _conv1x1(64, 64, 256) + issue + _relu(64, 256) + _gdma(y)
    alone = (T.gdma_latency_us * SEC + max((x + w + y) / BW, _conv1x1(64, 64, 256)) + T.sync_us * SEC
             + T.gdma_latency_us * SEC + max(2 * y / BW, _relu(64, 256)))
    assert group < alone

    model = _model([(64, 64)], (1, 64, 16, 16))
    prog = _compile(model)
    assert [type(u) for u in prog.units] == [GroupUnit] and prog.num_tiles == 1
    start = (T.launch_us + T.sync_us) * SEC
    assert prog.profile().est_latency_ms == pytest.approx((start + group) * 1e3, rel=1e-9)
    check_run_against_onnxruntime(model, prog)


@requires_ort
def test_first_layer_global_and_the_rest_a_group():
    """x (1, 1024, 8, 8) -> 1x1 conv to 2048 (8 MiB of weights) -> 1x1 conv to 16 (128 KiB)
    -> Relu. The first conv is cheaper global (its weights stream under its compute), the two
    layers after it cheaper as a group (one sync, the 16-channel map kept in local memory):
    the partition runs the first conv global and groups the rest, faster than the grown
    group."""
    model = _model([(1024, 2048), (2048, 16)], (1, 1024, 8, 8))
    prog = _compile(model)
    kinds = [(type(u), _ops(prog, u)) for u in prog.units]
    assert kinds == [(GlobalUnit, ["Conv"]), (GroupUnit, ["Conv", "Relu"])]
    check_run_against_onnxruntime(model, prog)

    x, w0, c0 = 1024 * 64 * 4, 2048 * 1024 * 4, 2048 * 64 * 4
    head = T.gdma_latency_us * SEC + max((x + w0 + c0) / BW, _conv1x1(1024, 2048, 64))
    start = (T.launch_us + T.sync_us) * SEC
    p = prog.profile()
    assert p.units[0].est_ms == pytest.approx(head * 1e3, rel=1e-9)
    assert p.units[1].start_ms == pytest.approx((start + head + T.sync_us * SEC) * 1e3, rel=1e-9)
    grown = _compile(model, weigh=False)
    assert [type(u) for u in grown.units] == [GroupUnit]
    assert p.est_latency_ms < grown.profile().est_latency_ms


@pytest.mark.parametrize("chip, cin, cout, k", [("bm1684x", 1024, 1024, 3), ("bm1684", 2048, 2048, 1),
                                                ("bm1684", 1024, 1024, 3)])
def test_an_integer_convolution_keeps_its_fused_epilogue(chip, cin, cout, k):
    """ConvInteger with large weights on a 4x4 map, its i32 bias Add, Requantize and Relu:
    the chip runs the last three inside the convolution's instruction, so no option that puts
    them in another unit than the convolution is weighed (run global alone, the convolution
    would be timed storing an 8-bit result and the Add loading an i32 accumulator). The
    program still gives the interpreter's bits."""
    rng = np.random.default_rng(1)
    b = ob.GraphBuilder("qconv_big")
    x = b.input("x", "i8", (1, cin, 4, 4))
    w = b.constant("w", rng.integers(-127, 128, (cout, cin, k, k)).astype(np.int8))
    acc = b.op("ConvInteger", [x, w], pads=(k // 2,) * 4, strides=(1, 1))
    acc = b.op("Add", [acc, b.constant("bias", rng.integers(-999, 999, (1, cout, 1, 1)).astype(np.int32))])
    q = b.op("Requantize", [acc, b.constant("mult", np.full(cout, 1 << 30, np.int32)),
                            b.constant("shift", np.full(cout, 12, np.int32))], axis=1, output_dtype="i8")
    b.output(b.op("Relu", [q]))
    g = b.build()
    prog = ob.compile(g, chip)
    unit_of = {n: i for i, u in enumerate(prog.units) for n in u.nodes}
    ops = {g.node(n).op: i for n, i in unit_of.items()}
    assert ops["Add"] == ops["Requantize"] == ops["Relu"] == ops["ConvInteger"]
    feed = {"x": rng.integers(-128, 128, (1, cin, 4, 4)).astype(np.int8)}
    (want,) = ob.interpret(g, feed).values()
    (got,) = prog.run(feed).values()
    np.testing.assert_array_equal(got, want)
