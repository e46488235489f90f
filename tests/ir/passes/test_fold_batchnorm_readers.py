"""fold_batchnorm decides which Conv outputs may go by the IR's shared map of readers
(``Uses`` of passes/fuse_chain.py): a Conv whose output another node also reads, or that is
a graph output, keeps its BatchNormalization; the other pairs of the same graph still fold.
Values are checked against onnx.reference on the ONNX model."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.ir.passes import FoldBatchNormIntoConv

RNG = np.random.default_rng(11)
C = 4


def _init(name: str, arr: np.ndarray):
    return numpy_helper.from_array(np.asarray(arr, np.float32), name)


def _pair(i: int, src: str) -> tuple[list, list]:
    """conv{i} (3x3, pads 1, with bias) reading ``src`` -> bn{i}; tensors c{i}, b{i}."""
    inits = [_init(f"W{i}", RNG.standard_normal((C, C, 3, 3))), _init(f"B{i}", RNG.standard_normal(C)),
             _init(f"scale{i}", RNG.uniform(0.5, 2, C)), _init(f"beta{i}", RNG.standard_normal(C)),
             _init(f"mean{i}", RNG.standard_normal(C)), _init(f"var{i}", RNG.uniform(0.1, 2, C))]
    nodes = [helper.make_node("Conv", [src, f"W{i}", f"B{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", [f"c{i}", f"scale{i}", f"beta{i}", f"mean{i}", f"var{i}"],
                              [f"b{i}"], name=f"bn{i}", epsilon=1e-3)]
    return nodes, inits


def _model(second_reader: str | None):
    """x -> conv0 -> bn0 -> conv1 -> bn1 -> y. ``second_reader`` gives conv1's output ``c1`` a
    second reader: "relu" (a Relu whose output is a graph output), "add" (bn1's output plus
    c1), "output" (c1 is a graph output too), or None."""
    n0, i0 = _pair(0, "x")
    n1, i1 = _pair(1, "b0")
    nodes, outputs, last = n0 + n1, [], "b1"
    if second_reader == "relu":
        nodes.append(helper.make_node("Relu", ["c1"], ["r"], name="relu"))
        outputs.append("r")
    elif second_reader == "add":
        nodes.append(helper.make_node("Add", ["b1", "c1"], ["s"], name="add"))
        last = "s"
    elif second_reader == "output":
        outputs.append("c1")
    graph = helper.make_graph(nodes, "two_pairs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 6, 6])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in [last, *outputs]],
                              initializer=i0 + i1)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])


@pytest.mark.parametrize("second_reader", ["relu", "add", "output"])
def test_a_conv_output_with_a_second_reader_keeps_its_batchnorm(second_reader: str) -> None:
    model = _model(second_reader)
    result = FoldBatchNormIntoConv()(ob.convert(model))
    assert result.modified  # the first pair still folds
    ops = [(n.op, n.name) for n in result.graph.nodes]
    assert ("BatchNormalization", "bn0") not in ops and ("BatchNormalization", "bn1") in ops, ops
    assert ("Conv", "conv1") in ops, ops
    x = RNG.standard_normal((1, C, 6, 6)).astype(np.float32)
    names = [o.name for o in model.graph.output]
    want = ReferenceEvaluator(model).run(names, {"x": x})
    got = ob.interpret(result.graph.verify(), {"x": x})
    for name, ref in zip(names, want):
        np.testing.assert_allclose(got[name], ref, rtol=1e-4, atol=1e-4, err_msg=name)


def test_both_pairs_fold_when_each_conv_output_has_one_reader() -> None:
    model = _model(None)
    result = FoldBatchNormIntoConv()(ob.convert(model))
    assert [n.op for n in result.graph.nodes] == ["Conv", "Conv"]
    assert [n.outputs[0].name for n in result.graph.nodes] == ["b0", "b1"]
    x = RNG.standard_normal((1, C, 6, 6)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(ob.interpret(result.graph.verify(), {"x": x})["b1"], want, rtol=1e-4, atol=1e-4)
    assert not FoldBatchNormIntoConv()(result.graph).modified
