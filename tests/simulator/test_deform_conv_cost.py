"""The simulator's cost of a deformable convolution: its multiply-adds run as the convolution of
the same shape (output channels over the lanes, output pixels over the EUs, at the conv peak and
efficiency), its bilinear sampling on the vector path; pinned by hand from the preset's
constants (it ran wholly at the vector rate, without the conv peak, efficiency and fill)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.simulator.cost import compute_seconds
from opbridge.simulator.schema import GlobalOp


def _program(c: int, m: int, hw: int, k: int, group: int = 1) -> ob.Program:
    """A 2-D DeformConv (pads keep the size) with its offsets a graph input."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((m, c // group, k, k)).astype(np.float32), "w")
    node = helper.make_node("DeformConv", ["x", "w", "off"], ["y"], name="dc", group=group,
                            pads=[k // 2] * 4)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw]),
                      helper.make_tensor_value_info("off", TensorProto.FLOAT, [1, 2 * k * k, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, hw, hw])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    return ob.compile(ob.convert(model), "bm1684")


def _fill(used: int, unit: int) -> float:
    return used / (math.ceil(used / unit) * unit)


@pytest.mark.parametrize("c, m, hw, k", [(16, 64, 16, 3), (8, 48, 10, 3), (32, 64, 8, 1)],
                         ids=["full-lanes", "part-lanes", "kernel=1x1"])
def test_deform_conv_costs_a_conv_plus_vector_sampling(c, m, hw, k):
    prog = _program(c, m, hw, k)
    t = prog.target
    (ins,) = [i for i in prog.instrs if isinstance(i, GlobalOp)]
    node = prog.graph.node(ins.node)
    pixels, kk = hw * hw, k * k
    macs = 2.0 * m * pixels * c * kk  # two FLOPs a weight tap per output element
    sampling = (2 * 4 + 1) * c * kk * pixels  # 4 corners a multiply-add each, and the mask
    assert ins.flops == macs + sampling
    eu = t.eu_bytes // 4  # f32 pixels an EU row holds
    fill = _fill(m, t.lanes) * _fill(pixels, eu)  # ic_parallel is 1 on BM1684 (f32)
    family = "conv" if k > 1 else "conv1x1"
    conv_s = macs / (t.peak_tflops_f32 * 1e12 * t.efficiency[family] * fill)
    vector_s = sampling / (t.lanes * eu * t.clock_mhz * 1e6 * t.efficiency["vector"] * fill)
    assert compute_seconds(t, node, (1, m, hw, hw), ins.flops) == pytest.approx(conv_s + vector_s, rel=1e-12)


def test_deform_conv_takes_what_a_conv_of_its_shape_takes_plus_its_sampling():
    """The same figure through the profile's global layer: its compute is the Conv's of the same
    shape plus the sampling at the vector rate (the layer is compute bound)."""
    prog = _program(16, 64, 16, 3)
    (unit,) = prog.profile().units
    t = prog.target
    macs, sampling = 2.0 * 64 * 256 * 16 * 9, 9.0 * 16 * 9 * 256
    compute = macs / (t.peak_tflops_f32 * 1e12 * t.efficiency["conv"]) + sampling / (
        t.lanes * (t.eu_bytes // 4) * t.clock_mhz * 1e6 * t.efficiency["vector"])
    assert unit.bound == "compute"
    assert unit.est_ms == pytest.approx((t.gdma_latency_us * 1e-6 + compute) * 1e3, rel=1e-9)
