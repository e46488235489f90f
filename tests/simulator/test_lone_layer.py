"""A layer that would make a layer group of its own runs as a global layer, at any rank, as
TPU-MLIR runs a group of one op (``GroupMethod::group_one_layer_proc`` in
``lib/Dialect/Tpu/Transforms/LayerGroup/GroupMethod.cpp``: valid, and costed as a global
layer by ``getGlobalLayerCycle``).

The estimate is written out from the bm1684 preset's fields, as in ``test_group_choice.py``:
a global layer costs one transfer set-up (``gdma_latency_us``) plus the longer of its traffic
(inputs, weights, output over ``ddr_bandwidth_gbps``) and its compute (FLOPs over the f32 peak
times the family's efficiency and the fill: channels over 64 lanes, pixels over the 32 f32 EUs
of a row); every unit starts ``sync_us`` after the one before it.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.simulator import GlobalUnit, GroupUnit

from ..conftest import requires_ort
from .helpers import check_run_against_onnxruntime

T = ob.Target.preset("bm1684")
SEC = 1e-6
BW = T.ddr_bandwidth_gbps * 1e9


def _fill(used: int, unit: int) -> float:
    return used / (-(-used // unit) * unit)


def _model(x_shape: list[int], middle: list[onnx.NodeProto], inits: list[onnx.TensorProto]) -> onnx.ModelProto:
    """x -> ReduceMean over the batch -> ``middle`` (reads "m", writes "r") -> ReduceMean over
    the channels -> y. Neither mean is a layer-group op (only a reduction of the last axis
    tiles): both run as global layers."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[0], keepdims=1), *middle,
             helper.make_node("ReduceMean", ["r"], ["y"], axes=[1], keepdims=1)]
    graph = helper.make_graph(nodes, "lone", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=12)


def _units(prog: ob.Program) -> list[tuple[type, list[str]]]:
    return [(type(u), [prog.graph.node(n).op for n in u.nodes]) for u in prog.units]


@requires_ort
def test_lone_conv_between_global_layers_runs_global():
    """x (2, 64, 8, 64) -> mean over the batch -> 1x1 conv 64 -> 256 channels on 8 x 64 pixels
    -> mean over the channels. The conv fits a tile (with a ReLU after it the two make a
    group, below), yet alone between two global layers it runs global: one transfer set-up
    and the longer of its traffic and its compute, its weights streamed alongside, where a
    group would load them first."""
    rng = np.random.default_rng(3)
    cin, cout, pixels = 64, 256, 8 * 64
    w = (rng.standard_normal((cout, cin, 1, 1)) * 0.1).astype(np.float32)
    conv = helper.make_node("Conv", ["m", "w"], ["r"], kernel_shape=[1, 1])
    model = _model([2, 64, 8, 64], [conv], [numpy_helper.from_array(w, "w")])
    prog = ob.compile(ob.convert(model), T)
    assert _units(prog) == [(GlobalUnit, ["ReduceMean"]), (GlobalUnit, ["Conv"]), (GlobalUnit, ["ReduceMean"])]
    assert not prog.units[1].fits_no_tile
    check_run_against_onnxruntime(model, prog)

    traffic = (cin * pixels + cout * cin + cout * pixels) * 4
    compute = 2.0 * cout * pixels * cin / (T.peak_tflops_f32 * 1e12 * T.efficiency["conv1x1"]
                                         * _fill(cout, 64) * _fill(pixels, 32))
    est = T.gdma_latency_us * SEC + max(traffic / BW, compute)
    p = prog.profile()
    assert p.units[1].est_ms == pytest.approx(est * 1e3, rel=1e-9)
    assert p.units[1].gdma_bytes == traffic
    assert p.units[1].start_ms == pytest.approx(p.units[0].end_ms + T.sync_us * SEC * 1e3, rel=1e-9)
    assert p.units[2].start_ms == pytest.approx(p.units[1].end_ms + T.sync_us * SEC * 1e3, rel=1e-9)

    # the same conv with a ReLU after it is a group: the conv is a local layer that tiles
    relu = helper.make_node("Relu", ["c"], ["r"])
    conv2 = helper.make_node("Conv", ["m", "w"], ["c"], kernel_shape=[1, 1])
    paired = _model([2, 64, 8, 64], [conv2, relu], [numpy_helper.from_array(w, "w")])
    assert _units(ob.compile(ob.convert(paired), T))[1] == (GroupUnit, ["Conv", "Relu"])


@requires_ort
@pytest.mark.parametrize("shape", [(2, 64, 48), (2, 64, 8, 64), (2, 8, 4, 8, 8)], ids=["rank3", "rank4", "rank5"])
def test_lone_elementwise_layer_runs_global_at_every_rank(shape):
    """One rule for every rank: a ReLU between two global means runs global (at rank 5 as
    before, at ranks 3 and 4 too), and its result is onnxruntime's."""
    model = _model(list(shape), [helper.make_node("Relu", ["m"], ["r"])], [])
    prog = ob.compile(ob.convert(model), T)
    assert _units(prog) == [(GlobalUnit, ["ReduceMean"]), (GlobalUnit, ["Relu"]), (GlobalUnit, ["ReduceMean"])]
    assert not prog.units[1].fits_no_tile
    check_run_against_onnxruntime(model, prog)
