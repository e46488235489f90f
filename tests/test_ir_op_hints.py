"""Shape errors of IR ops that a user reaches from the command line (a model, an --input-shape
that does not fit it) end with a hint that says what to check, not only the generic one the
converter gives an error without a hint. onnxruntime refuses each model at that shape too."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from opbridge.cli import main


def _model(node: onnx.NodeProto, dims: list[str], inits: tuple[onnx.TensorProto, ...] = ()) -> onnx.ModelProto:
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _const(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(arr, name)


CASES = {
    "Concat": (lambda: _model(helper.make_node("Concat", ["x", "c"], ["y"], axis=1, name="op"),
                              ["N", "C", "H", "W"], (_const("c", np.ones((1, 2, 4, 4), np.float32)),)),
               "1,3,5,5", "the inputs must agree on every axis but the concatenation axis"),
    "TopK": (lambda: _model(helper.make_node("TopK", ["x", "k"], ["y", "i"], name="op"), ["N", "L"],
                            (_const("k", np.array([10], np.int64)),)),
             "1,4", "k must be at most the axis size"),
    "Squeeze": (lambda: _model(helper.make_node("Squeeze", ["x", "a"], ["y"], name="op"), ["N", "C"],
                               (_const("a", np.array([1], np.int64)),)),
                "1,3", "squeeze only axes of size 1"),
    "DepthToSpace": (lambda: _model(helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, name="op"),
                                    ["N", "C", "H", "W"]),
                     "1,3,4,4", "the channels must be a multiple of blocksize^2"),
    "Conv-group": (lambda: _model(helper.make_node("Conv", ["x", "w"], ["y"], group=2, name="op"),
                                  ["N", "C", "H", "W"], (_const("w", np.ones((4, 2, 3, 3), np.float32)),)),
                   "1,3,8,8", "the input's channels come from the model's input shape (--input-shape)"),
    "LayerNormalization": (lambda: _model(helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=-1,
                                                          name="op"),
                                          ["N", "D"], (_const("s", np.ones(8, np.float32)),)),
                           "2,5", "scale and bias must broadcast to the normalised dims"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_shape_the_op_cannot_take_gets_the_ops_own_hint(case, tmp_path, capsys):
    make, shape, hint = CASES[case]
    model = make()
    dims = tuple(int(d) for d in shape.split(","))
    with pytest.raises(Exception):  # noqa: B017 - the outside reference refuses it as well
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        sess.run(None, {"x": np.ones(dims, np.float32)})
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    assert main(["convert", str(path), "--input-shape", "x=" + shape, "-o", str(tmp_path / "m.obir")]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err
    assert lines[0].startswith("error: [onnx] node 'op' ("), lines[0]
    assert lines[-1].startswith(f"hint: {hint}"), lines[-1]
