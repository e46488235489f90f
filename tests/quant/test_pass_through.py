"""ob.quantize: an op that only selects or moves values (MaxPool, Transpose, Reshape, Flatten,
Squeeze, Unsqueeze) after an int8 tensor keeps it 8-bit at its scale, as onnxruntime's QDQ
propagation and TPU-MLIR do: the op runs on the integers (a quarter of the bytes) and the next
int8 layer takes the tensor as it is, with no second rounding at a threshold of its own.

The reference is onnxruntime running a QDQ model this test writes from the scheme (symmetric
int8 / uint8 at threshold / 127 or / 255, per-channel int8 weights, int32 biases), with the
pass-through outputs quantized at their input's scale."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.quant.int8 import PASS_THROUGH, quant_points
from tests.conftest import requires_ort
from tests.quant.helpers import cos, ort_outputs, scheme_weights

RNG = np.random.default_rng(3)
W1 = RNG.standard_normal((8, 4, 3, 3)).astype(np.float32) * 0.3
B1 = RNG.standard_normal(8).astype(np.float32) * 0.1
W2 = RNG.standard_normal((6, 8, 1, 1)).astype(np.float32) * 0.3
B2 = RNG.standard_normal(6).astype(np.float32) * 0.1

#: (the pass-through chain between relu1 and conv2, as ONNX nodes reading "relu1" and making "moved")
CHAINS = {
    "maxpool": [helper.make_node("MaxPool", ["relu1"], ["moved"], kernel_shape=[2, 2], strides=[2, 2])],
    "maxpool-pads": [helper.make_node("MaxPool", ["relu1"], ["moved"], kernel_shape=[3, 3], strides=[2, 2],
                                      pads=[1, 1, 1, 1])],
    "transpose": [helper.make_node("Transpose", ["relu1"], ["moved"], perm=[0, 1, 3, 2])],
    "maxpool-transpose-maxpool-transpose": [
        helper.make_node("MaxPool", ["relu1"], ["p1"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("Transpose", ["p1"], ["t1"], perm=[0, 3, 2, 1]),
        helper.make_node("MaxPool", ["t1"], ["p2"], kernel_shape=[1, 1], strides=[1, 2]),
        helper.make_node("Transpose", ["p2"], ["moved"], perm=[0, 3, 2, 1])],
    "squeeze-unsqueeze": [
        helper.make_node("Unsqueeze", ["relu1", "ax"], ["u1"]),
        helper.make_node("Squeeze", ["u1", "ax"], ["moved"])],
}
#: the pass-through outputs of each chain (quantized at relu1's scale)
#: conv2's weights per chain: the channel pool (a 1x1 MaxPool of stride 2 along the transposed
#: channels, as LPRNet spells its MaxPool3d) keeps every other channel
W2_OF = {"maxpool-transpose-maxpool-transpose": np.ascontiguousarray(W2[:, ::2])}
MOVED = {"maxpool": ["moved"], "maxpool-pads": ["moved"], "transpose": ["moved"],
         "maxpool-transpose-maxpool-transpose": ["p1", "t1", "p2", "moved"],
         "squeeze-unsqueeze": ["u1", "moved"]}


def _model(chain: str) -> onnx.ModelProto:
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["relu1"], name="relu1"),
             *CHAINS[chain],
             helper.make_node("Conv", ["moved", "w2", "b2"], ["y"], name="conv2")]
    w2 = W2_OF.get(chain, W2)
    inits = [numpy_helper.from_array(a, n) for a, n in ((W1, "w1"), (B1, "b1"), (w2, "w2"), (B2, "b2"))]
    inits.append(numpy_helper.from_array(np.array([4], np.int64), "ax"))
    g = helper.make_graph(nodes, chain, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _feeds(n: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, 4, 8, 8)).astype(np.float32)} for _ in range(n)]


def _reference(model: onnx.ModelProto, table, moved: list[str], w2: np.ndarray) -> bytes:
    """``model`` as a QDQ model: x and y at their own thresholds (int8), relu1 (and conv1's
    output, which only relu1 reads) at relu1's (uint8), every pass-through output in ``moved``
    at relu1's too; weights per output channel, biases int32 at s_x * s_w."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = list(g.initializer)

    def params(entry: str) -> tuple[np.float32, np.generic]:
        r = table[entry]
        return (np.float32(r.threshold / 255), np.uint8(0)) if r.min >= 0 else (np.float32(r.threshold / 127), np.int8(0))

    def qdq(name: str, entry: str, out: str) -> list[onnx.NodeProto]:
        s, z = params(entry)
        inits.extend([numpy_helper.from_array(s, f"{name}__s"), numpy_helper.from_array(z, f"{name}__z")])
        return [helper.make_node("QuantizeLinear", [name, f"{name}__s", f"{name}__z"], [f"{name}__q"]),
                helper.make_node("DequantizeLinear", [f"{name}__q", f"{name}__s", f"{name}__z"], [out])]

    def weights(w: np.ndarray, b: np.ndarray, x_entry: str, tag: str) -> list[str]:
        w_inits, w_nodes, outs = scheme_weights(w, b, params(x_entry)[0], f"{tag}w", f"{tag}b")
        inits.extend(w_inits)
        nodes.extend(w_nodes)
        return outs

    nodes: list[onnx.NodeProto] = qdq("x", "x", "x__dq")
    rename = {"x": "x__dq"}
    for node in g.node:
        ins = [rename.get(i, i) for i in node.input]
        if node.name == "conv1":
            ins[1:3] = weights(W1, B1, "x", "c1")
        if node.name == "conv2":
            ins[1:3] = weights(w2, B2, "relu1", "c2")
        nodes.append(helper.make_node(node.op_type, ins, list(node.output), name=node.name,
                                      **{a.name: helper.get_attribute_value(a) for a in node.attribute}))
        for o in node.output:
            if o in ("c1", "relu1", *moved):
                nodes += qdq(o, "relu1", f"{o}__dq")
                rename[o] = f"{o}__dq"
            elif o == "y":
                nodes += qdq(o, "y", "y__dq")
    graph = helper.make_graph(nodes, "ref", list(g.input), [helper.make_tensor_value_info("y__dq", TensorProto.FLOAT, None)],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()


def _quantized(chain: str):
    model = _model(chain)
    g = ob.convert(model)
    table = ob.calibrate(g, _feeds(6, seed=1), method="minmax")
    return model, g, table, ob.quantize(g, table)


@pytest.mark.parametrize("chain", list(CHAINS))
def test_pass_through_ops_take_their_inputs_scale(chain):
    _, g, _, _ = _quantized(chain)
    points = quant_points(g, {"conv1", "conv2"})
    moved = {n.outputs[0].name for n in g.nodes if n.op in PASS_THROUGH}
    assert moved and all(points[v] == points["relu1"] == "relu1" for v in moved)


@pytest.mark.parametrize("chain", list(CHAINS))
def test_pass_through_ops_run_on_the_integers(chain):
    *_, q = _quantized(chain)
    ops = [n for n in q.nodes if n.op in PASS_THROUGH]
    assert ops and all(n.inputs[0].dtype == n.outputs[0].dtype == "u8" for n in ops)
    # one Q/DQ pair fewer per pass-through op: nothing is dequantized before conv2's input
    assert not any(n.op == "DequantizeLinear" and not n.inputs[0].is_constant for n in q.nodes
                   if n.outputs[0].users and n.outputs[0].users[0].op in PASS_THROUGH)


@requires_ort
@pytest.mark.parametrize("chain", list(CHAINS))
def test_int8_pass_through_matches_onnxruntime_running_the_scheme(chain):
    model, _, table, q = _quantized(chain)
    ref = _reference(model, table, MOVED[chain], W2_OF.get(chain, W2))
    for f in _feeds(3, seed=9):
        want = next(iter(ort_outputs(ref, f).values()))
        np.testing.assert_allclose(ob.interpret(q, f)["y"], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("chain", list(CHAINS))
def test_int8_pass_through_runs_on_the_simulator_bit_for_bit(chain):
    *_, q = _quantized(chain)
    for target in ("bm1684", "bm1684x"):
        prog = ob.compile(q, target=target)
        for f in _feeds(2, seed=5):
            np.testing.assert_array_equal(prog.run(f)["y"], ob.interpret(q, f)["y"])


def test_a_pass_through_graph_output_keeps_its_own_threshold():
    """A chain through a graph output is left to the rule before it: the output is conv2's
    input at a threshold of its own; the int8 graph still gives that output (close to the float)."""
    model = _model("maxpool-pads")
    model.graph.output.append(helper.make_tensor_value_info("moved", TensorProto.FLOAT, None))
    g = ob.convert(model)
    table = ob.calibrate(g, _feeds(4, seed=1), method="minmax")
    points = quant_points(g, {"conv1", "conv2"})
    assert points["moved"] == "moved" and points["relu1"] == "relu1"
    q = ob.quantize(g, table)
    for f in _feeds(2, seed=4):
        got, want = ob.interpret(q, f)["moved"], ob.interpret(g, f)["moved"]
        assert cos(got, want) > 0.999
