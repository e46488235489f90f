"""ONNX models with symbolic dims (dim_param) convert with the dims kept, save and load, and
run in the interpreter for several concrete sizes, matching onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from tests.conftest import requires_ort

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

pytestmark = requires_ort


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "dyn", inputs, outputs, [numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _ort(model, feeds):
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def cnn_model():
    """Conv -> Relu -> MaxPool -> Flatten -> MatMul on a dynamic batch."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], axis=1),
             helper.make_node("MatMul", ["f", "m"], ["y"])]
    inits = [("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
             ("m", rng.standard_normal((64, 5)).astype(np.float32))]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])], inits)


def seq_model():
    """Attention-like scores over a dynamic batch and sequence: x @ x^T, softmax, concat."""
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["x", "xt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "x"], ["a"]),
             helper.make_node("Concat", ["a", "x"], ["y"], axis=1)]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", None, 8])])


def test_convert_keeps_dim_params():
    g = ob.convert(cnn_model())
    assert g.inputs[0].shape == ("batch", 3, 8, 8) and g.outputs[0].shape == ("batch", 5)


def test_show_prints_symbolic_dims(tmp_path):
    from opbridge.ir.printer import format_graph

    text = format_graph(ob.convert(seq_model()))
    assert "%x: f32[batch,seq,8]" in text and "f32[batch,2*seq,8]" in text


def test_input_shapes_still_give_a_static_graph():
    g = ob.convert(cnn_model(), input_shapes={"x": (2, 3, 8, 8)})
    assert all(isinstance(d, int) for v in g.values().values() for d in v.shape)
    ob.compile(g, "bm1684")  # a static graph compiles as before


@pytest.mark.parametrize("batch", [1, 2, 5])
def test_cnn_matches_onnxruntime_for_each_batch(batch):
    model = cnn_model()
    g = ob.convert(model)
    x = np.random.default_rng(batch).standard_normal((batch, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(ob.interpret(g, {"x": x})["y"], _ort(model, {"x": x})[0],
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("batch,seq", [(1, 1), (2, 7), (3, 16)])
def test_seq_model_matches_onnxruntime(batch, seq, tmp_path):
    model = seq_model()
    g = ob.convert(model)
    ob.save(g, tmp_path / "s.obir")
    g2 = ob.load(tmp_path / "s.obir")
    assert g2.inputs[0].shape == ("batch", "seq", 8)
    x = np.random.default_rng(seq).standard_normal((batch, seq, 8)).astype(np.float32)
    np.testing.assert_allclose(ob.interpret(g2, {"x": x})["y"], _ort(model, {"x": x})[0],
                               rtol=1e-4, atol=1e-5)


def test_input_that_does_not_fit_names_the_dims():
    g = ob.convert(seq_model())
    with pytest.raises(ob.OpbridgeError, match=r"'x' wants shape \[batch,seq,8\], got \[2,3,9\]"):
        ob.interpret(g, {"x": np.zeros((2, 3, 9), np.float32)})


def test_inputs_sharing_a_dim_must_agree():
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 4]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n", 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    g = ob.convert(model)
    a = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(ob.interpret(g, {"a": a, "b": a})["y"], _ort(model, {"a": a, "b": a})[0])
    with pytest.raises(ob.OpbridgeError, match=r"'b' wants shape \[n,4\], got \[2,4\] \(with n=3\)"):
        ob.interpret(g, {"a": a, "b": np.ones((2, 4), np.float32)})


def test_compile_names_the_symbolic_input_and_dim():
    g = ob.convert(cnn_model())
    with pytest.raises(ob.SimulatorError, match=r"input 'x' has symbolic dim\(s\) batch.*\n.*--input-shape x=1,3,8,8"):
        ob.compile(g, "bm1684")


def _torch_encoder_model():
    torch = pytest.importorskip("torch")
    import io
    import warnings

    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
            self.conv = torch.nn.Conv1d(16, 8, 3, padding=1)

        def forward(self, x):
            return self.conv(self.enc(x).transpose(1, 2)).flatten(1)

    buf = io.BytesIO()
    with warnings.catch_warnings():  # the tracer's notes on Python booleans in MultiheadAttention
        warnings.simplefilter("ignore")
        torch.onnx.export(Net().eval(), (torch.randn(2, 5, 16),), buf, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch"}},
                          opset_version=17, dynamo=False)
    return onnx.load_from_string(buf.getvalue())


@pytest.mark.parametrize("batch", [1, 3])
def test_torch_exported_encoder_with_dynamic_batch(batch):
    """Shape -> Gather -> Concat -> Reshape chains of torch's exporter: the reshapes declare
    symbolic dims (batch, 2*batch) and every batch matches onnxruntime. (The legacy exporter
    bakes the traced key length into one reshape, so the sequence stays at the traced 5.)"""
    model = _torch_encoder_model()
    g = ob.convert(model)
    assert g.inputs[0].shape == ("batch", "seq", 16) and g.outputs[0].shape == ("batch", "8*seq")
    reshapes = [n for n in g.nodes if n.op == "DynamicReshape"]
    assert reshapes and all("batch" in str(n.outputs[0].shape) for n in reshapes)
    x = np.random.default_rng(batch).standard_normal((batch, 5, 16)).astype(np.float32)
    np.testing.assert_allclose(ob.interpret(g, {"x": x})["y"], _ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
