"""``fuse_conv_activation`` with a residual Add: ``act(Conv(x) + z)`` -> ``FusedConv(x, W, B,
Z=z)``, checked as the other fusions are: fused vs unfused interpreter vs onnxruntime, and the
simulator on the fused graph (whole tensors, and row tiles in a small local memory)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import opbridge as ob
from opbridge.ir.passes import DEFAULT_PASSES, FUSION_PASSES

from .test_fuse import _check, _f32, _model, _ort

RNG = np.random.default_rng(5)
SHAPE = [1, 6, 12, 10]


def _residual_model(*, z_first: bool = False, act: bool = True, z_shape: list[int] | None = None,
                    conv_read_elsewhere: bool = False, bias: bool = True) -> onnx.ModelProto:
    """x -> Conv(3x3, pads 1) -> Add(z) [-> Relu]; z is a second input (the shortcut)."""
    inits = [numpy_helper.from_array(RNG.standard_normal((6, 6, 3, 3)).astype(np.float32) / 7, "w"),
             numpy_helper.from_array(RNG.standard_normal(6).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["c"],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["z", "c"] if z_first else ["c", "z"], ["s"])]
    outs = [_f32("s", None)]
    if act:
        nodes.append(helper.make_node("Relu", ["s"], ["y"]))
        outs = [_f32("y", None)]
    if conv_read_elsewhere:
        nodes.append(helper.make_node("Neg", ["c"], ["n"]))
        outs.append(_f32("n", None))
    return _model(nodes, [_f32("x", SHAPE), _f32("z", z_shape or SHAPE)], outs, inits)


def _feeds(z_shape: list[int] | None = None) -> dict[str, np.ndarray]:
    return {"x": RNG.standard_normal(SHAPE).astype(np.float32),
            "z": RNG.standard_normal(z_shape or SHAPE).astype(np.float32)}


@pytest.mark.parametrize("z_first", [False, True], ids=["conv+z", "z+conv"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "bias=absent"])
def test_conv_add_relu_fuses_with_z(z_first: bool, bias: bool) -> None:
    g = _check(_residual_model(z_first=z_first, bias=bias), _feeds(), ("fuse_conv_activation",))
    assert [n.op for n in g.nodes] == ["FusedConv"]
    node = g.nodes[0]
    assert node.inputs[3] is not None and node.inputs[3].name == "z"
    assert (node.inputs[2] is not None) == bias
    assert node.attrs["activation"] == "Relu"


def test_conv_add_without_activation_fuses() -> None:
    g = _check(_residual_model(act=False), _feeds(), ("fuse_conv_activation",))
    assert [n.op for n in g.nodes] == ["FusedConv"]
    assert g.nodes[0].attrs["activation"] == "none" and g.nodes[0].inputs[3].name == "z"


def test_broadcast_add_is_not_a_residual() -> None:
    """An Add that broadcasts z (a per-channel bias) is not a Z, which has the output's
    shape; the Conv's only reader is then that Add, so nothing fuses."""
    z_shape = [1, 6, 1, 1]
    g = _check(_residual_model(z_shape=z_shape), _feeds(z_shape), ("fuse_conv_activation",))
    assert [n.op for n in g.nodes] == ["Conv", "Add", "Relu"]


def test_conv_output_read_elsewhere_keeps_the_add() -> None:
    g = _check(_residual_model(conv_read_elsewhere=True), _feeds(), ("fuse_conv_activation",))
    assert sorted(n.op for n in g.nodes) == ["Add", "Conv", "Neg", "Relu"]


def test_fused_z_in_simulator_row_tiles() -> None:
    """In a small local memory the FusedConv is cut into row tiles; each tile must read Z at
    its own output rows (not the input's halo rows). A Neg after it keeps it in a group (alone
    it would be a one-op group, which runs as a global layer)."""
    model = _residual_model()
    model.graph.node.append(helper.make_node("Neg", ["y"], ["yn"]))
    model.graph.output[0].name = "yn"
    feeds = _feeds()
    fused = ob.convert(model, passes=DEFAULT_PASSES + ("fuse_conv_activation",))
    prog = ob.compile(fused, ob.Target.preset("bm1684", lmem_bytes_per_lane=1024))
    assert any(u.__class__.__name__ == "GroupUnit" for u in prog.units)
    tiles = sum(1 for i in prog.instrs if i.TAG == "compute")
    assert tiles > 1, "the test needs row tiles"
    np.testing.assert_allclose(next(iter(prog.run(feeds).values())), _ort(model, feeds)[0],
                               rtol=1e-4, atol=1e-5)


def test_resnet_blocks_fuse_every_residual() -> None:
    from tests.simulator.models import resnet_onnx

    model = resnet_onnx(depths=(1, 1), width=8, image=32)
    x = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)
    g = _check(model, {"data": x}, FUSION_PASSES)
    ops = g.op_counts()
    assert "Add" not in ops and "Relu" not in ops and "BatchNormalization" not in ops
    assert sum(1 for n in g.nodes if n.op == "FusedConv" and len(n.inputs) > 3) == 2
