"""Window ops (pools, convolutions) cut into row tiles at a small local memory, against
onnxruntime.

Each case is one ONNX node (or a short chain) with an input too big for the lane, so the
layer-group compiler must cut it along H: the tiles' input slices, halos and edge pads must
reproduce the whole op, including ceil mode (the last window rounded up, reaching past the
padded input), dilation and asymmetric pads. The reference is onnxruntime: the onnx
``ReferenceEvaluator`` (onnx 1.23) disagrees with onnxruntime, PyTorch and the ONNX
conformance data on several ceil-mode pools, so it is not used here.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.simulator import StreamUnit

from ..conftest import requires_ort
from .helpers import assert_close, audit_local_memory

pytestmark = requires_ort

#: (batch, channels, H, W): 4 channels per lane, 23 * 4 * 4 = 368 bytes a row in a lane
SHAPE = (2, 256, 17, 23)
LMEM = 4096
#: the input of the ungrouped convolutions: one channel a lane, 64 * 40 * 4 = 10 KiB of rows
CONV_SHAPE = (2, 32, 64, 40)


def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto] | None = None,
           shape: tuple[int, ...] = SHAPE) -> onnx.ModelProto:
    """``nodes`` (writing "y") followed by a Neg: a layer alone would run as a global layer (a
    one-op group, as TPU-MLIR runs it), so the window op shares its group with one that loses
    nothing of its output."""
    for nd in nodes:
        nd.output[:] = ["pre" if o == "y" else o for o in nd.output]
    nodes = [*nodes, helper.make_node("Neg", ["pre"], ["y"])]
    graph = helper.make_graph(
        nodes, "window", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)


def _check(model: onnx.ModelProto, lmem: int = LMEM, row_tiled: bool = True,
           shape: tuple[int, ...] = SHAPE) -> ob.Program:
    """Compile at ``lmem`` bytes a lane, run, compare with onnxruntime; returns the program."""
    import onnxruntime as ort

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    g = ob.convert(model)
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem))
    groups = prog.groups
    assert groups, "the window op should be a local layer in a layer group"
    if row_tiled:
        assert any(u.k > 1 for u in groups), "the input should not fit the lane uncut"
    assert_close(prog.run({"x": x})["y"], want, "simulator vs onnxruntime")
    audit_local_memory(prog)
    return prog


POOL_GEOMETRY = [
    pytest.param((3, 2, 1), id="k=3,s=2"),
    pytest.param((3, 3, 1), id="k=3,s=3"),
    pytest.param((2, 2, 1), id="k=2,s=2"),
    pytest.param((5, 3, 1), id="k=5,s=3"),
    pytest.param((3, 2, 2), id="k=3,s=2,d=2"),
]
PADS = [
    pytest.param(None, id="pads=absent"),
    pytest.param((1, 0, 2, 1), id="pads=1,0,2,1"),
    pytest.param((2, 1, 0, 0), id="pads=2,1,0,0"),
    pytest.param((0, 1, 1, 0), id="pads=0,1,1,0"),
]
CEIL = [pytest.param(None, id="ceil=absent"), pytest.param(0, id="ceil=0"),
        pytest.param(1, id="ceil=1")]


def _pool_attrs(geometry, pads, ceil) -> dict:
    k, s, d = geometry
    attrs: dict = {"kernel_shape": [k, k], "strides": [s, s]}
    if d != 1:
        attrs["dilations"] = [d, d]
    if pads is not None:
        if max(pads) >= (k - 1) * d + 1:
            pytest.skip(f"pads {pads} are not smaller than the {k}-tap window: invalid ONNX")
        attrs["pads"] = list(pads)
    if ceil is not None:
        attrs["ceil_mode"] = ceil
    return attrs


def _h_overhang(attrs: dict) -> bool:
    """Whether the last window along H reaches past the padded input (ceil mode), computed
    from the ONNX shape rule (independently of the kernel)."""
    k, s = attrs["kernel_shape"][0], attrs["strides"][0]
    d = attrs.get("dilations", [1])[0]
    pb, pe = (attrs.get("pads") or [0, 0, 0, 0])[0::2]
    h, eff = SHAPE[2], (k - 1) * d + 1
    if not attrs.get("ceil_mode"):
        return False
    n = -(-(h + pb + pe - eff) // s) + 1
    if (n - 1) * s >= h + pb:
        n -= 1
    return (n - 1) * s + eff > h + pb + pe


@pytest.mark.parametrize("ceil", CEIL)
@pytest.mark.parametrize("pads", PADS)
@pytest.mark.parametrize("geometry", POOL_GEOMETRY)
def test_maxpool_tiled(geometry, pads, ceil):
    attrs = _pool_attrs(geometry, pads, ceil)
    _check(_model([helper.make_node("MaxPool", ["x"], ["y"], **attrs)]))


@pytest.mark.parametrize("count_include_pad", [pytest.param(None, id="cip=absent"),
                                               pytest.param(1, id="cip=1")])
@pytest.mark.parametrize("ceil", CEIL)
@pytest.mark.parametrize("pads", PADS)
@pytest.mark.parametrize("geometry", POOL_GEOMETRY)
def test_averagepool_tiled(geometry, pads, ceil, count_include_pad):
    attrs = _pool_attrs(geometry, pads, ceil)
    if count_include_pad is not None:
        attrs["count_include_pad"] = count_include_pad
    # with count_include_pad the divisor counts pads but not the ceil-mode overhang, which a
    # cut tile could not tell apart: such a pool is tiled on N only
    row_tiled = not (count_include_pad and _h_overhang(attrs))
    _check(_model([helper.make_node("AveragePool", ["x"], ["y"], **attrs)]),
           lmem=LMEM if row_tiled else 4 * LMEM, row_tiled=row_tiled)


@pytest.mark.parametrize("ceil", CEIL)
@pytest.mark.parametrize("geometry", [g for g in POOL_GEOMETRY if g.values[0][2] == 1])
def test_lppool_tiled(geometry, ceil):
    attrs = _pool_attrs(geometry, (1, 0, 0, 1), ceil)
    _check(_model([helper.make_node("LpPool", ["x"], ["y"], p=2, **attrs)]))


@pytest.mark.parametrize("pads", PADS)
@pytest.mark.parametrize("geometry", [
    pytest.param((3, 1, 1), id="k=3,s=1"),
    pytest.param((3, 2, 1), id="k=3,s=2"),
    pytest.param((3, 1, 3), id="k=3,s=1,d=3"),
    pytest.param((5, 3, 2), id="k=5,s=3,d=2"),
    pytest.param((1, 2, 1), id="k=1,s=2"),
])
@pytest.mark.parametrize("group", [pytest.param(1, id="group=1"), pytest.param(256, id="depthwise")])
def test_conv_tiled(geometry, pads, group):
    k, s, d = geometry
    attrs: dict = {"kernel_shape": [k, k], "strides": [s, s], "group": group}
    if d != 1:
        attrs["dilations"] = [d, d]
    if pads is not None:
        attrs["pads"] = list(pads)
    rng = np.random.default_rng(1)
    # ungrouped: few channels (one a lane, 10 KiB of rows), so the weights fit next to a tile
    shape = SHAPE if group > 1 else CONV_SHAPE
    cout = shape[1]
    w = rng.standard_normal((cout, shape[1] // group, k, k)).astype(np.float32) * 0.1
    b = rng.standard_normal(cout).astype(np.float32)
    inits = [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")]
    _check(_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)], inits, shape),
           lmem=6 * 1024 if group > 1 else 2 * LMEM, shape=shape)


@pytest.mark.parametrize("ceil", [pytest.param(0, id="ceil=0"), pytest.param(1, id="ceil=1")])
def test_conv_pool_conv_chain_tiled(ceil):
    """Halos compose across a group: a dilated depthwise conv, a ceil-mode pool, a conv."""
    rng = np.random.default_rng(2)
    c = SHAPE[1]
    w1 = rng.standard_normal((c, 1, 3, 3)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((c, 1, 3, 3)).astype(np.float32) * 0.3
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], group=c, kernel_shape=[3, 3],
                         dilations=[2, 2], pads=[2, 1, 1, 2]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[0, 1, 1, 0], ceil_mode=ceil),
        helper.make_node("Conv", ["p", "w2"], ["y"], group=c, kernel_shape=[3, 3],
                         pads=[1, 0, 0, 1]),
    ]
    inits = [onnx.numpy_helper.from_array(w1, "w1"), onnx.numpy_helper.from_array(w2, "w2")]
    prog = _check(_model(nodes, inits), lmem=2 * LMEM)
    assert any(len(u.nodes) >= 3 for u in prog.groups)


@pytest.mark.parametrize("geometry", [
    pytest.param((3, 1, 1, (1, 1, 1, 1)), id="k=3,pads=1"),
    pytest.param((3, 2, 2, (2, 0, 1, 2)), id="k=3,s=2,d=2,pads=2,0,1,2"),
])
def test_streamed_conv_in_channel_chunks(geometry):
    """Weights too big for a lane: the conv streams chunks of a few output channels, each
    computed tap by tap over row tiles."""
    k, s, d, pads = geometry
    rng = np.random.default_rng(3)
    shape = (1, 256, 24, 20)
    w = rng.standard_normal((64, 256, k, k)).astype(np.float32) * 0.1
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[k, k], strides=[s, s],
                            dilations=[d, d], pads=list(pads))
    model = _model([node], [onnx.numpy_helper.from_array(w, "w")], shape)
    prog = ob.compile(ob.convert(model), ob.Target.preset("bm1684", lmem_bytes_per_lane=LMEM))
    streamed = [u for u in prog.units if isinstance(u, StreamUnit)]
    # chunks of at most 8 channels: the tap-by-tap tile kernel
    assert streamed and streamed[0].chunks >= 8
    import onnxruntime as ort

    x = rng.standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert_close(prog.run({"x": x})["y"], want, "streamed conv vs onnxruntime")
    audit_local_memory(prog)
