"""ONNX RNN/GRU/LSTM whose input has symbolic dims (a dynamic sequence length or batch), as
``ob.convert`` keeps them: the graph converts once and runs at every length, matching
onnxruntime (the reference) at two different lengths."""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HIDDEN, FEATURES = 4, 3
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _model(op: str, direction: str, x_shape: list, bias: bool, layout: int = 0) -> bytes:
    rng = np.random.default_rng(7)
    ndir = 2 if direction == "bidirectional" else 1
    g = GATES[op] * HIDDEN
    inits = [numpy_helper.from_array(rng.uniform(-1, 1, (ndir, g, FEATURES)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-1, 1, (ndir, g, HIDDEN)).astype(np.float32), "R")]
    ins = ["x", "W", "R"]
    if bias:
        inits.append(numpy_helper.from_array(rng.uniform(-1, 1, (ndir, 2 * g)).astype(np.float32), "B"))
        ins.append("B")
    outs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, ins, outs, hidden_size=HIDDEN, direction=direction, layout=layout)
    graph = helper.make_graph([node], "rnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]).SerializeToString()


def _check(model: bytes, shapes: list[tuple[int, ...]], reference: str = "onnxruntime") -> None:
    g = ob.convert(onnx.load_from_string(model))
    if reference == "onnxruntime":
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    else:  # onnxruntime refuses layout=1 recurrent ops
        from onnx.reference import ReferenceEvaluator

        sess = ReferenceEvaluator(onnx.load_from_string(model))
    rng = np.random.default_rng(0)
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        want = sess.run(None, {"x": x})
        got = list(ob.interpret(g, {"x": x}).values())
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_symbolic_sequence_and_batch(op: str, direction: str) -> None:
    _check(_model(op, direction, ["seq", "batch", FEATURES], bias=True), [(5, 2, FEATURES), (2, 3, FEATURES)])


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_symbolic_batch_static_sequence(op: str) -> None:
    _check(_model(op, "forward", [4, "batch", FEATURES], bias=False), [(4, 1, FEATURES), (4, 3, FEATURES)])


def test_symbolic_sequence_batch_first() -> None:
    _check(_model("GRU", "bidirectional", ["batch", "seq", FEATURES], bias=True, layout=1),
           [(2, 6, FEATURES), (1, 3, FEATURES)], reference="onnx.reference")


def test_symbolic_sequence_keeps_the_dims() -> None:
    g = ob.convert(onnx.load_from_string(_model("LSTM", "forward", ["seq", "batch", FEATURES], bias=True)))
    assert [tuple(v.shape) for v in g.outputs] == [("seq", 1, "batch", HIDDEN), (1, "batch", HIDDEN),
                                                   (1, "batch", HIDDEN)]


def test_dropout_mask_with_a_symbolic_batch() -> None:
    """The other mapping the node suite found reading a symbolic dim as an int: Dropout's
    all-true inference mask is made at run time in the input's shape."""
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node("Dropout", ["x"], ["y", "mask"])
    graph = helper.make_graph([node], "dropout", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("mask", TensorProto.BOOL, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    g = ob.convert(model)
    ref = ReferenceEvaluator(model)
    for n in (1, 4):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        got = ob.interpret(g, {"x": x})
        for a, b in zip(got.values(), ref.run(None, {"x": x})):
            np.testing.assert_array_equal(a, b)
            assert a.shape == b.shape


def test_symbolic_sequence_compiles_once_and_runs_on_the_simulator_at_two_lengths() -> None:
    model = _model("LSTM", "bidirectional", ["seq", "batch", FEATURES], bias=True)
    g = ob.convert(onnx.load_from_string(model))
    prog = ob.compile(g, "bm1684", dynamic=True, max_shapes={"x": (6, 3, FEATURES)})
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for shape in [(6, 3, FEATURES), (2, 1, FEATURES)]:
        x = rng.standard_normal(shape).astype(np.float32)
        for got, want in zip(prog.run({"x": x}).values(), sess.run(None, {"x": x})):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_sequence_lens_with_a_symbolic_sequence_is_a_clean_error_naming_the_node() -> None:
    m = onnx.load_from_string(_model("GRU", "forward", ["seq", 2, FEATURES], bias=True))
    m.graph.initializer.append(numpy_helper.from_array(np.array([3, 3], np.int32), "lens"))
    m.graph.node[0].input.extend(["lens"])
    m.graph.node[0].name = "the_gru"
    with pytest.raises(ob.UnsupportedOpError, match=r"node 'the_gru' \(GRU\).*symbolic length 'seq'") as err:
        ob.convert(m)
    assert "--input-shape" in (err.value.hint or "")
    fixed = ob.convert(m, input_shapes={"x": (3, 2, FEATURES)})  # the fix the hint gives
    assert [tuple(v.shape) for v in fixed.outputs] == [(3, 1, 2, HIDDEN), (1, 2, HIDDEN)]
