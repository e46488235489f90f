"""IR passes: constant folding, dead-code elimination, BatchNormalization folding into Conv.

Each pass's result is compared with the unoptimised graph and with onnx's ReferenceEvaluator.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.ir.passes import EliminateDeadCode, FoldBatchNormIntoConv, FoldConstants, optimize

RNG = np.random.default_rng(7)


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def test_fold_constants_replaces_constant_subgraph():
    b = ob.GraphBuilder("fold")
    x = b.input("x", "f32", (2, 3))
    c1 = b.constant("c1", np.full((3,), 2.0, np.float32))
    c2 = b.constant("c2", np.arange(3, dtype=np.float32))
    s = b.op("Add", [c1, c2], name="const_add")
    b.output(b.op("Add", [x, s], name="use"))
    g = b.build()
    xv = RNG.standard_normal((2, 3)).astype(np.float32)
    before = ob.interpret(g, {"x": xv})
    r = FoldConstants()(g)
    assert r.modified and [n.name for n in r.graph.nodes] == ["use"]
    assert "const_add" in r.graph.constants  # the folded value keeps its name
    np.testing.assert_array_equal(ob.interpret(r.graph.verify(), {"x": xv})["use"], before["use"])
    assert not FoldConstants()(r.graph).modified


def test_dead_code_drops_unused_nodes_and_constants():
    b = ob.GraphBuilder("dce")
    x = b.input("x", "f32", (4,))
    unused_c = b.constant("unused", np.ones(4, np.float32))
    b.op("Add", [x, unused_c], name="dangling")
    b.output(b.op("Relu", [x], name="kept"))
    g = b.build()
    r = EliminateDeadCode()(g)
    assert r.modified and [n.name for n in r.graph.nodes] == ["kept"] and not r.graph.constants
    assert not EliminateDeadCode()(r.graph.verify()).modified


def test_shape_chain_folds_to_constants_at_conversion():
    # y = x + Range(0, Shape(x)[-1], 1) * ConstantOfShape(Shape(x))[..] : the exported-model pattern
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "last"], ["n"], axis=0),
        helper.make_node("Range", ["zero", "n", "one"], ["ramp"]),
        helper.make_node("Cast", ["ramp"], ["rampf"], to=TensorProto.FLOAT),
        helper.make_node("ConstantOfShape", ["shp"], ["ones"],
                         value=numpy_helper.from_array(np.array([1.5], np.float32))),
        helper.make_node("Mul", ["ones", "rampf"], ["t"]),
        helper.make_node("Add", ["x", "t"], ["y"]),
    ]
    inits = [_init("last", np.array(-1, np.int64)), _init("zero", np.array(0, np.int64)),
             _init("one", np.array(1, np.int64))]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    ir = ob.convert(m)
    assert [n.op for n in ir.nodes] == ["Add"]
    xv = RNG.standard_normal((2, 5)).astype(np.float32)
    ref = ReferenceEvaluator(m).run(None, {"x": xv})[0]
    np.testing.assert_allclose(ob.interpret(ir, {"x": xv})["y"], ref, rtol=1e-6)


def _conv_bn_model(bias: bool, group: int, conv_out_used_twice: bool):
    cin, cout = 4, 6
    w = RNG.standard_normal((cout, cin // group, 3, 3)).astype(np.float32)
    inits = [_init("W", w)]
    conv_in = ["x", "W"]
    if bias:
        inits.append(_init("B", RNG.standard_normal(cout).astype(np.float32)))
        conv_in.append("B")
    for name, arr in (("scale", RNG.uniform(0.5, 2, cout)), ("beta", RNG.standard_normal(cout)),
                      ("mean", RNG.standard_normal(cout)), ("var", RNG.uniform(0.1, 2, cout))):
        inits.append(_init(name, arr.astype(np.float32)))
    nodes = [
        helper.make_node("Conv", conv_in, ["c"], name="conv1", pads=[1, 1, 1, 1], group=group),
        helper.make_node("BatchNormalization", ["c", "scale", "beta", "mean", "var"], ["bn"], name="bn1",
                         epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["y"], name="relu1"),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if conv_out_used_twice:
        nodes.append(helper.make_node("Relu", ["c"], ["y2"], name="relu2"))
        outputs.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "convbn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, cin, 7, 7])],
                          outputs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])


@pytest.mark.parametrize("bias", [False, True], ids=["bias=absent", "bias=present"])
@pytest.mark.parametrize("group", [1, 2], ids=["group=1", "group=2"])
def test_fold_batchnorm_matches_unfused_and_reference(bias, group):
    m = _conv_bn_model(bias, group, conv_out_used_twice=False)
    unfused = ob.convert(m)
    fused = optimize(ob.convert(m), ["fold_batchnorm"])
    assert [n.op for n in unfused.nodes] == ["Conv", "BatchNormalization", "Relu"]
    assert [n.op for n in fused.nodes] == ["Conv", "Relu"]
    assert fused.nodes[0].outputs[0].name == "bn" and fused.nodes[0].origin.name == "conv1"
    x = RNG.standard_normal((2, 4, 7, 7)).astype(np.float32)
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    a = ob.interpret(unfused, {"x": x})["y"]
    b = ob.interpret(fused, {"x": x})["y"]
    np.testing.assert_allclose(a, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)


def test_fold_batchnorm_skips_conv_output_with_other_users():
    m = _conv_bn_model(True, 1, conv_out_used_twice=True)
    r = FoldBatchNormIntoConv()(ob.convert(m))
    assert not r.modified


def test_unknown_pass_name():
    with pytest.raises(ob.OpbridgeError, match=r"(?s)unknown pass 'nope'.*known passes: dead_code"):
        optimize(ob.convert(_conv_bn_model(False, 1, False)), ["nope"])
