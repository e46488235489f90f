"""Compiled programs give the interpreter's numbers, at several local-memory sizes.

The reference is ``ob.interpret`` (the ops' numpy computes over whole tensors, themselves
tested against onnxruntime / the ONNX reference evaluator); the simulator must reach the
same numbers through tiles, halos, GDMA copies and local addresses.
"""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from opbridge.simulator import StreamUnit

from .helpers import assert_close, audit_local_memory

KIB = 1024


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _w(rng, *shape, scale=None):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    s = scale if scale is not None else np.sqrt(2.0 / fan_in)
    return (rng.standard_normal(shape) * s).astype(np.float32)


def conv_pool_chain() -> ob.Graph:
    """Conv(3x3, pads) -> Relu -> MaxPool(3x3 s2) -> Conv(3x3 s2, dilation 2) -> AveragePool."""
    rng = _rng(1)
    b = ob.GraphBuilder("conv_pool_chain")
    x = b.input("x", "f32", (2, 3, 40, 36))
    y = b.op("Conv", [x, b.constant("w1", _w(rng, 16, 3, 3, 3)), b.constant("b1", _w(rng, 16, scale=0.1))],
             strides=(1, 1), pads=(1, 1, 1, 1))
    y = b.op("Relu", [y])
    y = b.op("MaxPool", [y], kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))
    y = b.op("Conv", [y, b.constant("w2", _w(rng, 24, 16, 3, 3))], strides=(2, 2), pads=(2, 1, 2, 1),
             dilations=(2, 1))
    y = b.op("Relu", [y])
    y = b.op("AveragePool", [y], kernel_shape=(2, 2), strides=(1, 1), pads=(0, 0, 1, 1), count_include_pad=0)
    b.output(y)
    return b.build()


def residual_block() -> ob.Graph:
    """A ResNet basic block with a strided projection shortcut and a broadcast bias Add."""
    rng = _rng(2)
    b = ob.GraphBuilder("residual_block")
    x = b.input("x", "f32", (1, 32, 30, 30))
    y = b.op("Conv", [x, b.constant("w1", _w(rng, 48, 32, 3, 3))], strides=(2, 2), pads=(1, 1, 1, 1))
    y = b.op("BatchNormalization", [y, b.constant("s", 1 + 0.1 * _w(rng, 48, scale=1)),
                                    b.constant("bb", _w(rng, 48, scale=0.1)),
                                    b.constant("m", _w(rng, 48, scale=0.1)),
                                    b.constant("v", (1 + rng.random(48)).astype(np.float32))])
    y = b.op("Relu", [y])
    y = b.op("Conv", [y, b.constant("w2", _w(rng, 48, 48, 3, 3))], strides=(1, 1), pads=(1, 1, 1, 1))
    sc = b.op("Conv", [x, b.constant("w3", _w(rng, 48, 32, 1, 1))], strides=(2, 2), pads=(0, 0, 0, 0))
    s = b.op("Add", [y, sc])
    s = b.op("Add", [s, b.constant("bias", _w(rng, 1, 48, 1, 1, scale=0.1))])
    b.output(b.op("Relu", [s]))
    return b.build()


def attention_block() -> ob.Graph:
    """LayerNorm -> Q/K/V projections -> softmax(Q K^T) V -> residual, on rank-4 [1, heads, S, D]."""
    rng = _rng(3)
    b = ob.GraphBuilder("attention_block")
    x = b.input("x", "f32", (1, 2, 24, 16))
    h = b.op("LayerNormalization", [x, b.constant("g", 1 + 0.1 * _w(rng, 16, scale=1)),
                                    b.constant("be", _w(rng, 16, scale=0.1))], axis=-1)
    q = b.op("MatMul", [h, b.constant("wq", _w(rng, 16, 16))])
    k = b.op("MatMul", [h, b.constant("wk", _w(rng, 16, 16))])
    v = b.op("MatMul", [h, b.constant("wv", _w(rng, 16, 16))])
    kt = b.op("Transpose", [k], perm=(0, 1, 3, 2))
    a = b.op("Softmax", [b.op("MatMul", [q, kt])], axis=-1)
    o = b.op("MatMul", [a, v])
    b.output(b.op("Add", [o, x]))
    return b.build()


MODELS = {"conv_pool_chain": conv_pool_chain, "residual_block": residual_block,
          "attention_block": attention_block}


def _feeds(g: ob.Graph, seed: int = 7) -> dict[str, np.ndarray]:
    rng = _rng(seed)
    return {v.name: rng.standard_normal(v.shape).astype(np.float32) for v in g.inputs}


@pytest.mark.parametrize("lmem_kib", [512, 64, 4], ids=["lmem=512KiB", "lmem=64KiB", "lmem=4KiB"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_matches_interpreter(model, lmem_kib):
    g = MODELS[model]()
    feeds = _feeds(g)
    ref = ob.interpret(g, feeds)
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem_kib * KIB))
    out = prog.run(feeds)
    assert list(out) == list(ref)
    for name in ref:
        assert_close(out[name], ref[name], f"{model} @ {lmem_kib} KiB: {name}")
    assert audit_local_memory(prog) > 0


@pytest.mark.parametrize("model", sorted(MODELS))
def test_small_local_memory_forces_tiling(model):
    g = MODELS[model]()
    big = ob.compile(g, "bm1684")
    small = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=4 * KIB))
    assert big.profile().num_tiles == big.profile().num_layer_groups  # everything fits whole
    p = small.profile()
    assert p.num_tiles > p.num_layer_groups
    assert p.lmem_peak_bytes <= 4 * KIB


def test_group_splits_then_streams_when_nothing_fits():
    """At 1 KiB per lane even one lane's share of the 3x3 weights (1152 bytes) does not fit:
    those convs run on whole tensors as global layers, the rest still runs in layer groups,
    and the numbers stay right."""
    g = residual_block()
    feeds = _feeds(g)
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=1 * KIB))
    streamed = [u for u in prog.units if u.CATEGORY == "global"]
    assert streamed and all(isinstance(u, StreamUnit) or u.fits_no_tile for u in streamed)
    assert prog.groups
    ref = ob.interpret(g, feeds)
    out = prog.run(feeds)
    for name in ref:
        assert_close(out[name], ref[name], name)
    audit_local_memory(prog)


def test_conv_with_too_many_weights_streams_output_channel_chunks():
    """256 output channels of 3x3x32 weights take 4608 bytes per lane, more than the 2 KiB
    lane; 64 of them take 1152: the conv streams four chunks of output channels, each with
    its slice of the weights, through real local buffers."""
    rng = _rng(5)
    b = ob.GraphBuilder("wide_conv")
    x = b.input("x", "f32", (1, 32, 10, 12))
    y = b.op("Conv", [x, b.constant("w", _w(rng, 256, 32, 3, 3)), b.constant("b", _w(rng, 256, scale=0.1))],
             pads=(1, 1, 1, 1))
    b.output(b.op("Relu", [y]))
    g = b.build()
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=2 * KIB))
    conv = next(u for u in prog.units if u.nodes == ("conv_1",))
    assert isinstance(conv, StreamUnit)
    assert conv.chunks == 4 and conv.lmem_peak <= 2 * KIB
    feeds = _feeds(g)
    ref = ob.interpret(g, feeds)
    out = prog.run(feeds)
    for name in ref:
        assert_close(out[name], ref[name], name)
    assert audit_local_memory(prog) > 0


def test_deterministic_bytes():
    g = residual_block()
    feeds = _feeds(g)
    target = ob.Target.preset("bm1684", lmem_bytes_per_lane=8 * KIB)
    p1, p2 = ob.compile(g, target), ob.compile(g, target)
    a = p1.run(feeds)
    b = p1.run(feeds)
    c = p2.run(feeds)
    for k in a:
        assert a[k].tobytes() == b[k].tobytes() == c[k].tobytes()
    assert p1.instrs == p2.instrs


def test_ddr_plan_reuses_memory():
    g = conv_pool_chain()
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=1 * KIB))
    d = prog.ddr
    assert d.activation_peak_bytes < d.activation_no_reuse_bytes
    # tensors live at the same time never share DDR bytes: checked by running with
    # intermediates kept and comparing every one with the interpreter
    feeds = _feeds(g)
    out = prog.run(feeds, keep_intermediates=True)
    ref = ob.interpret(g, feeds, keep_intermediates=True)
    assert len(out) > 2
    for name, a in out.items():
        assert_close(a, ref[name], name)


def test_feed_errors_name_the_input():
    prog = ob.compile(residual_block(), "bm1684")
    with pytest.raises(ob.OpbridgeError, match="'x'"):
        prog.run({"x": np.zeros((1, 32, 31, 30), np.float32)})
    with pytest.raises(ob.OpbridgeError, match="was not fed"):
        prog.run({})


def test_compile_rejects_non_graph():
    with pytest.raises(ob.SimulatorError, match="Graph"):
        ob.compile("model.onnx", "bm1684")
