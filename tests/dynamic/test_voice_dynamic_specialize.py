"""What dynamic compile's specialisation does for the voice model (tests/dynamic/
test_voice_dynamic.py), on other graphs: a recurrent layer's Scan (both directions) and an ONNX
Scan unroll for the fed length, and exporter shape chains that fold make their run-time
reshapes static TPU layers; each gives the bytes of a program compiled from a static
conversion, and matches onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference for these tests")
onnx = pytest.importorskip("onnx")


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_dynamic_compile_unrolls_both_directions_of_a_recurrent_layer(op):
    """A bidirectional layer's reverse Scan reads and stacks its steps backwards: unrolled for
    each length, every layer runs on the TPU, with the bytes of a static conversion's program."""
    from tests.mappers.onnx.test_rnn_symbolic import _model

    model = _model(op, "bidirectional", ["seq", 1, 3], bias=True)
    prog = ob.compile(ob.convert(onnx.load_from_string(model)), "bm1684", dynamic=True,
                      max_shapes={"x": (6, 1, 3)})
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for seq in (2, 6):
        x = np.random.default_rng(seq).standard_normal((seq, 1, 3)).astype(np.float32)
        exact = ob.compile(ob.convert(onnx.load_from_string(model), input_shapes={"x": x.shape}), "bm1684")
        got, same = prog.run({"x": x}), exact.run({"x": x})
        for (name, a), want in zip(got.items(), sess.run(None, {"x": x})):
            np.testing.assert_array_equal(a, same[name])
            np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-5)
        assert prog.program_for({"x": x}).profile().num_cpu_layers == 0


def test_dynamic_compile_unrolls_a_scan_whose_results_are_graph_outputs():
    """An ONNX Scan (a running sum read backwards) over a symbolic length: unrolled for each
    length, its final state and stacked outputs keep their names as graph outputs."""
    from onnx import TensorProto, helper

    f32 = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body", [helper.make_tensor_value_info("s_in", f32, [2]), helper.make_tensor_value_info("x_t", f32, [2])],
        [helper.make_tensor_value_info("s_out", f32, [2]), helper.make_tensor_value_info("y_t", f32, [2])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1,
                          scan_input_directions=[1])], "cumsum",
        [helper.make_tensor_value_info("s0", f32, [2]), helper.make_tensor_value_info("x", f32, ["seq", 2])],
        [helper.make_tensor_value_info("s", f32, [2]), helper.make_tensor_value_info("y", f32, ["seq", 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    prog = ob.compile(ob.convert(model), "bm1684", dynamic=True, max_shapes={"x": (5, 2)})
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for seq in (1, 3, 5):
        feeds = {"s0": np.ones(2, np.float32), "x": np.arange(2 * seq, dtype=np.float32).reshape(seq, 2)}
        got = prog.run(feeds)
        assert list(got) == ["s", "y"]
        for a, want in zip(got.values(), sess.run(None, feeds)):
            np.testing.assert_array_equal(a, want)
        assert prog.program_for(feeds).profile().num_cpu_layers == 0


@pytest.mark.parametrize("batch", [1, 3])
def test_folded_shape_chains_make_run_time_reshapes_static(batch):
    """torch's exporter reshapes with Shape -> Gather -> Concat chains over the symbolic batch
    (DynamicReshape, host-only): specialised to a batch, the chains fold and the reshapes are
    static layers on the TPU, as in a program compiled from a static conversion."""
    from tests.dynamic.test_shapes_symbolic import _ort, _torch_encoder_model

    model = _torch_encoder_model()
    g = ob.convert(model)
    assert any(n.op == "DynamicReshape" for n in g.nodes)
    prog = ob.compile(g, "bm1684", dynamic=True, max_shapes={"x": (4, 5, 16)})
    x = np.random.default_rng(batch).standard_normal((batch, 5, 16)).astype(np.float32)
    got = prog.run({"x": x})["y"]
    exact = ob.compile(ob.convert(model, input_shapes={"x": x.shape}), "bm1684")
    np.testing.assert_array_equal(got, exact.run({"x": x})["y"])
    np.testing.assert_allclose(got, _ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert prog.program_for({"x": x}).profile().num_cpu_layers == 0
