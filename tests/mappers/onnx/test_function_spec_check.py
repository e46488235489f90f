"""Ops converted through their ONNX function body are first checked against the op's own type
and shape inference: an input type the spec does not allow is refused naming the node, with
the spec hint, as onnxruntime refuses the model when it loads it."""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.errors import OpbridgeError


def _rope(pos_type: int) -> onnx.ModelProto:
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], name="rope")
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 8]),
         helper.make_tensor_value_info("cos", TensorProto.FLOAT, [16, 4]),
         helper.make_tensor_value_info("sin", TensorProto.FLOAT, [16, 4]),
         helper.make_tensor_value_info("pos", pos_type, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def test_an_input_type_outside_the_spec_is_refused_naming_the_node(tmp_path):
    model = _rope(TensorProto.INT32)
    with pytest.raises(Exception, match="tensor\\(int32\\)"):  # the outside reference refuses it too
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    path = tmp_path / "rope.onnx"
    onnx.save(model, str(path))
    with pytest.raises(OpbridgeError) as info:
        ob.convert(str(path))
    err = info.value
    assert "'rope'" in str(err) and "position_ids" in err.message and "int32" in err.message
    assert err.hint and "ONNX spec of RotaryEmbedding" in err.hint


def test_the_same_node_with_the_spec_type_converts(tmp_path):
    path = tmp_path / "rope.onnx"
    onnx.save(_rope(TensorProto.INT64), str(path))
    graph = ob.convert(str(path))
    assert [tuple(o.shape) for o in graph.outputs] == [(1, 2, 4, 8)]
