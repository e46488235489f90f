"""The conversion loop's naming: every value of the converted graph has a name of its own,
whatever names the model's nodes and tensors take; results against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import opbridge as ob

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference for these tests")

F = TensorProto.FLOAT


def _model(nodes, outputs):
    x = helper.make_tensor_value_info("x", F, [2, 3])
    outs = [helper.make_tensor_value_info(o, F, [2, 3]) for o in outputs]
    g = helper.make_graph(nodes, "m", [x], outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("nodes,outputs", [
    # the node named like its output first makes 'y_1' (its output name 'y' is the model's) and
    # renames it 'y': the repeated output must not be given 'y_1' again
    ([helper.make_node("Relu", ["x"], ["z"], name="r"), helper.make_node("Neg", ["z"], ["y"], name="y")],
     ["y", "y"]),
    ([helper.make_node("Neg", ["x"], ["y"], name="y")], ["y", "y", "y"]),
    ([helper.make_node("Neg", ["x"], ["y"])], ["y", "y"]),
    ([helper.make_node("Identity", ["x"], ["y"], name="y")], ["y", "y"]),
], ids=["renamed-node-then-twice", "thrice", "unnamed-node", "input-passed-through"])
def test_a_tensor_returned_more_than_once_gives_outputs_of_their_own(nodes, outputs):
    m = _model(nodes, outputs)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    want = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    g = ob.convert(m)
    names = [v.name for v in g.outputs]
    assert len(set(names)) == len(outputs) and names[0] == "y"
    got = ob.interpret(g, {"x": x})
    assert len(got) == len(want)
    for name, w in zip(names, want):
        np.testing.assert_array_equal(got[name], w)
