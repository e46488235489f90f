"""A tensor with no channels (an Expand or Slice to an empty axis) compiles and runs.

The compiler's lane-efficiency estimate divided by the lanes a zero-channel tile fills
(ZeroDivisionError); such a tile has no work, and the program's result is the empty tensor
onnxruntime gives."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import opbridge as ob

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference for these shapes")


@pytest.mark.parametrize("target", ["bm1684", "bm1684x"])
@pytest.mark.parametrize("dims", [[2, 0, 3, 4], [0, 1, 3, 4], [2, 1, 0, 4]], ids=["c=0", "n=0", "h=0"])
def test_an_empty_axis_compiles_and_runs_as_onnxruntime(tmp_path, dims, target):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2 if dims[0] else 1, 1, 3 if dims[2] else 1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    shape = helper.make_tensor("s", TensorProto.INT64, [4], dims)
    graph = helper.make_graph([helper.make_node("Expand", ["x", "s"], ["e"]),
                               helper.make_node("Relu", ["e"], ["y"])], "g", [x], [y], [shape])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    feed = {"x": np.ones([2 if dims[0] else 1, 1, 3 if dims[2] else 1, 4], np.float32)}
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    got = ob.compile(ob.convert(path), target=target).run(feed)["y"]
    assert got.shape == want.shape == tuple(dims)
