"""The built-in fusion passes: each one fires on the pattern it is for, leaves alone what it
must not touch, and the fused graph matches the unfused graph and onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.errors import OpbridgeError
from opbridge.ir.passes import DEFAULT_PASSES, FUSION_PASSES, PASSES, make_passes
from tests.ir.transformer_models import bert_feeds, bert_onnx

ort = pytest.importorskip("onnxruntime", reason="the fusions are checked against onnxruntime")


def _ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _check(model: onnx.ModelProto, feeds: dict, passes: tuple[str, ...], *,
           rtol: float = 1e-4, atol: float = 1e-5) -> ob.Graph:
    """Fused vs unfused interpreter vs onnxruntime (and the simulator on the fused graph)."""
    plain = ob.convert(model)
    fused = ob.convert(model, passes=DEFAULT_PASSES + passes)
    want = _ort(model, feeds)
    got_plain = list(ob.interpret(plain, feeds).values())
    got_fused = list(ob.interpret(fused, feeds).values())
    got_sim = list(ob.compile(fused, target="bm1684").run(feeds).values())
    for w, p, f, s in zip(want, got_plain, got_fused, got_sim):
        np.testing.assert_allclose(f, p, rtol=rtol, atol=atol)
        np.testing.assert_allclose(f, w, rtol=rtol, atol=atol)
        np.testing.assert_allclose(s, w, rtol=rtol, atol=atol)
    assert [v.name for v in fused.outputs] == [v.name for v in plain.outputs]
    return fused


def _model(nodes, inputs, outputs, inits, opset: int = 14) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "m", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _f32(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


RNG = np.random.default_rng(0)

ACTS = {
    "Relu": (helper.make_node("Relu", ["c"], ["y"]), "Relu", ()),
    "LeakyRelu": (helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.2), "LeakyRelu", (0.2,)),
    "Clip(relu6)": (helper.make_node("Clip", ["c", "lo", "hi"], ["y"]), "Clip", (0.0, 6.0)),
    "Sigmoid": (helper.make_node("Sigmoid", ["c"], ["y"]), "Sigmoid", ()),
    "HardSigmoid": (helper.make_node("HardSigmoid", ["c"], ["y"], alpha=0.3, beta=0.4),
                    "HardSigmoid", (0.3, 0.4)),
}


def _conv_act_model(act: onnx.NodeProto, *, bias: bool = True, group: int = 1,
                    extra_reader: bool = False) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(RNG.standard_normal((8, 4 // group, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(RNG.standard_normal(8).astype(np.float32), "b"),
             numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
    conv = helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["c"], pads=[1, 1, 1, 1],
                            strides=[2, 1], group=group)
    nodes = [conv, act]
    outs = [_f32("y", None)]
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["c"], ["z"]))
        outs.append(_f32("z", None))
    return _model(nodes, [_f32("x", [1, 4, 9, 10])], outs, inits)


@pytest.mark.parametrize("act", list(ACTS), ids=[f"act={a}" for a in ACTS])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "bias=absent"])
def test_conv_activation_fuses(act, bias):
    node, name, params = ACTS[act]
    x = (RNG.standard_normal((1, 4, 9, 10)) * 3).astype(np.float32)
    g = _check(_conv_act_model(node, bias=bias), {"x": x}, ("fuse_conv_activation",))
    assert [n.op for n in g.nodes] == ["FusedConv"]
    assert g.nodes[0].attrs["activation"] == name
    assert g.nodes[0].attrs["activation_params"] == pytest.approx(params)


def test_conv_activation_grouped_conv_fuses():
    x = RNG.standard_normal((1, 4, 9, 10)).astype(np.float32)
    g = _check(_conv_act_model(ACTS["Relu"][0], group=2), {"x": x}, ("fuse_conv_activation",))
    assert g.nodes[0].op == "FusedConv" and g.nodes[0].attrs["group"] == 2


def test_conv_output_read_elsewhere_is_not_fused():
    x = RNG.standard_normal((1, 4, 9, 10)).astype(np.float32)
    g = _check(_conv_act_model(ACTS["Relu"][0], extra_reader=True), {"x": x},
               ("fuse_conv_activation",))
    assert sorted(n.op for n in g.nodes) == ["Conv", "Neg", "Relu"]


def test_resnet_block_fuses_batchnorm_then_relu():
    from tests.simulator.models import resnet_onnx

    model = resnet_onnx(depths=(1, 1), width=8, image=32)
    x = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)
    g = _check(model, {"data": x}, FUSION_PASSES)
    ops = g.op_counts()
    assert "BatchNormalization" not in ops and ops.get("FusedConv", 0) >= 3
    prog = ob.compile(g, target="bm1684")
    assert prog.profile().num_layer_groups >= 1  # FusedConv still tiles in layer groups


def _dense_model(bias_first: bool | None, act: str | None, rank: int = 3) -> onnx.ModelProto:
    shape = [2, 5, 6][-rank:]
    inits = [numpy_helper.from_array(RNG.standard_normal((6, 7)).astype(np.float32), "w"),
             numpy_helper.from_array(RNG.standard_normal(7).astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"])]
    last = "mm"
    if bias_first is not None:
        nodes.append(helper.make_node("Add", ["b", "mm"] if bias_first else ["mm", "b"], ["ad"]))
        last = "ad"
    if act is not None:
        nodes.append(helper.make_node(act, [last], ["y"]))
        last = "y"
    nodes.append(helper.make_node("Identity", [last], ["out"]))
    return _model(nodes, [_f32("x", shape)], [_f32("out", None)], inits)


@pytest.mark.parametrize("bias_first,act,rank", [
    (False, "Relu", 3), (True, "Relu", 3), (False, None, 3), (None, "Tanh", 3), (True, None, 2),
], ids=["bias+relu", "bias_first+relu", "bias", "bias=absent+tanh", "bias_first,rank=2"])
def test_matmul_bias_activation_fuses(bias_first, act, rank):
    model = _dense_model(bias_first, act, rank)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    g = _check(model, {"x": RNG.standard_normal(shape).astype(np.float32)},
               ("fuse_matmul_bias_activation",))
    fused = [n for n in g.nodes if n.op == "FusedMatMul"]
    assert len(fused) == 1 and fused[0].attrs["activation"] == (act or "none")
    assert (fused[0].inputs[2] is not None) == (bias_first is not None)


def test_matmul_alone_is_left_alone():
    g = ob.convert(_dense_model(None, None), passes=DEFAULT_PASSES + ("fuse_matmul_bias_activation",))
    assert [n.op for n in g.nodes] == ["MatMul", "Identity"]


@pytest.fixture(scope="module")
def bert():
    model = bert_onnx(layers=2, hidden=32, heads=4, seq=8)
    return model, bert_feeds(model)


@pytest.mark.parametrize("name,op,count", [
    ("fuse_layernorm", "LayerNormalization", 4),
    ("fuse_gelu", "Gelu", 2),
    ("fuse_attention", "ScaledDotProductAttention", 2),
    ("fuse_matmul_bias_activation", "FusedMatMul", 12),
], ids=["layernorm", "gelu", "attention", "matmul_bias"])
def test_bert_pattern_fuses(bert, name, op, count):
    model, feeds = bert
    g = _check(model, feeds, (name,))
    assert g.op_counts().get(op) == count


def test_bert_all_fusions(bert):
    model, feeds = bert
    g = _check(model, feeds, FUSION_PASSES)
    ops = g.op_counts()
    assert {"ReduceMean", "Erf", "Softmax", "Pow", "Sqrt", "MatMul"}.isdisjoint(ops)
    gelus = [n for n in g.nodes if n.op == "FusedMatMul" and n.attrs["activation"] == "Gelu"]
    assert len(gelus) == 2  # the FFN's first dense layer took the GELU in


def test_gelu_half_first_order_fuses():
    """HF's ``x * 0.5 * (1 + erf(x / sqrt(2)))``: Mul(x, 0.5) first, then by (1 + erf)."""
    c = {n: numpy_helper.from_array(np.array(v, np.float32), n)
         for n, v in (("r2", 1.4142135), ("one", 1.0), ("half", 0.5))}
    nodes = [helper.make_node("Mul", ["x", "half"], ["h"]), helper.make_node("Div", ["x", "r2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]), helper.make_node("Add", ["e", "one"], ["a"]),
             helper.make_node("Mul", ["h", "a"], ["y"])]
    model = _model(nodes, [_f32("x", [3, 5])], [_f32("y", None)], list(c.values()))
    g = _check(model, {"x": RNG.standard_normal((3, 5)).astype(np.float32) * 3}, ("fuse_gelu",))
    assert [n.op for n in g.nodes] == ["Gelu"]


def test_layernorm_without_beta_and_wrong_axes():
    def ln(axes):
        c = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
             (("two", 2.0), ("eps", 1e-5))]
        c.append(numpy_helper.from_array(RNG.standard_normal(6).astype(np.float32), "g"))
        nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=axes, keepdims=1),
                 helper.make_node("Sub", ["x", "m"], ["d"]), helper.make_node("Pow", ["d", "two"], ["p"]),
                 helper.make_node("ReduceMean", ["p"], ["v"], axes=axes, keepdims=1),
                 helper.make_node("Add", ["v", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["s"]),
                 helper.make_node("Div", ["d", "s"], ["n"]), helper.make_node("Mul", ["n", "g"], ["y"])]
        return _model(nodes, [_f32("x", [4, 6])], [_f32("y", None)], c)

    x = {"x": RNG.standard_normal((4, 6)).astype(np.float32)}
    g = _check(ln([-1]), x, ("fuse_layernorm",))
    assert [n.op for n in g.nodes] == ["LayerNormalization"] and g.nodes[0].inputs[2] is None
    g = _check(ln([0]), x, ("fuse_layernorm",))  # over the leading axis: not a layer norm
    assert "LayerNormalization" not in g.op_counts()


def test_fusions_are_registered_and_grouped():
    assert set(FUSION_PASSES) <= set(PASSES)
    names = [p.name for p in make_passes(["default", "fusions"])]
    assert names == list(DEFAULT_PASSES + FUSION_PASSES)
    with pytest.raises(OpbridgeError, match="groups: default, fusions"):
        make_passes(["fuse_everything"])


def test_fused_conv_checks_activation_params():
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", (1, 2, 4, 4))
    w = b.constant("w", np.ones((2, 2, 1, 1), np.float32))
    with pytest.raises(OpbridgeError, match="activation_params"):
        b.op("FusedConv", [x, w], activation="Clip", activation_params=(0.0,))
