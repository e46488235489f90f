"""A small CNN quantized through QDQ (QuantizeLinear / DequantizeLinear around each Conv, as
onnxruntime's quantizer writes it: per-channel int8 weights, int32 biases at scale
x_scale * w_scale), run on the simulated BM1684 as int8 layer groups.

The integer graph is the QDQ model's meaning on the chip: each DQ-Conv-Q becomes ConvInteger
(i8 x i8 -> i32), the i32 bias added, Requantize with the per-channel multiplier and shift of
``x_scale * w_scale / y_scale``; Relu and MaxPool between quantize/dequantize pairs of one
scale (zero point 0) are exact on the int8 values. It is built here from the model's own
parameters, and also by the ``fold_qdq`` pass where that is registered. Checks: the simulator
equals the interpreter bit for bit (batch 1 and 4, whole and tiled), matches onnxruntime on
the QDQ model within one step of the output scale, and moves fewer GDMA bytes than the float
model it was quantized from.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.ir.ops.quant import quantize_multiplier
from opbridge.ir.passes import PASSES
from opbridge.simulator import GlobalUnit, GroupUnit, Load

from ..conftest import requires_ort

pytestmark = requires_ort

C_IN, M1, M2, HW = 3, 16, 8, 20
SX, ZX, S1, S2, Z2 = 0.03, -5, 0.05, 0.08, 3


def _params() -> dict[str, np.ndarray]:
    """Weights quantized per output channel (symmetric), biases at x_scale * w_scale."""
    rng = np.random.default_rng(11)
    p: dict[str, np.ndarray] = {}
    for name, shape, s_in in (("1", (M1, C_IN, 3, 3), SX), ("2", (M2, M1, 3, 3), S1)):
        wf = rng.normal(0, 0.3, shape).astype(np.float32)
        sw = (np.abs(wf).reshape(shape[0], -1).max(1) / 127).astype(np.float32)
        p[f"wq{name}"] = np.clip(np.rint(wf / sw.reshape(-1, 1, 1, 1)), -127, 127).astype(np.int8)
        p[f"sw{name}"] = sw
        p[f"bs{name}"] = (s_in * sw).astype(np.float32)
        p[f"bq{name}"] = np.rint(rng.normal(0, 0.5, shape[0]) / p[f"bs{name}"]).astype(np.int32)
    return p


def _qdq_model(n: int) -> onnx.ModelProto:
    p = _params()
    inits = [numpy_helper.from_array(np.array(v), k) for k, v in {
        "sx": np.float32(SX), "zx": np.int8(ZX), "s1": np.float32(S1), "z1": np.int8(0),
        "s2": np.float32(S2), "z2": np.int8(Z2), "zb": np.zeros(M1, np.int32),
        "zb2": np.zeros(M2, np.int32), "zw1": np.zeros(M1, np.int8), "zw2": np.zeros(M2, np.int8),
        **p}.items()]
    mk = helper.make_node

    def qdq(src: str, dst: str, s: str, z: str) -> list[onnx.NodeProto]:
        return [mk("QuantizeLinear", [src, s, z], [dst + "q"]),
                mk("DequantizeLinear", [dst + "q", s, z], [dst])]

    def conv(i: int, src: str, zb: str) -> list[onnx.NodeProto]:
        return [mk("DequantizeLinear", [f"wq{i}", f"sw{i}", f"zw{i}"], [f"w{i}"], axis=0),
                mk("DequantizeLinear", [f"bq{i}", f"bs{i}", zb], [f"b{i}"], axis=0),
                mk("Conv", [src, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1])]

    nodes = (qdq("x", "xd", "sx", "zx") + conv(1, "xd", "zb") + qdq("c1", "c1d", "s1", "z1")
             + [mk("Relu", ["c1d"], ["r1"])] + qdq("r1", "r1d", "s1", "z1")
             + [mk("MaxPool", ["r1d"], ["p1"], kernel_shape=[2, 2], strides=[2, 2])]
             + qdq("p1", "p1d", "s1", "z1") + conv(2, "p1d", "zb2") + qdq("c2", "y", "s2", "z2"))
    graph = helper.make_graph(nodes, "qdq_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, C_IN, HW, HW])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, M2, HW // 2, HW // 2])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    return model


def _requant(b: ob.GraphBuilder, acc: ob.Value, tag: str, scale: np.ndarray, zp: int) -> ob.Value:
    m, s = quantize_multiplier(scale.astype(np.float64))
    return b.op("Requantize", [acc, b.constant(f"m{tag}", m), b.constant(f"sh{tag}", s),
                               b.constant(f"zy{tag}", np.array(zp, np.int8))], axis=1, output_dtype="i8")


def _integer_graph(n: int) -> ob.Graph:
    """The QDQ model's integer form on the chip (see the module doc), from its parameters."""
    p = _params()
    b = ob.GraphBuilder("int8_cnn")
    x = b.input("x", "f32", (n, C_IN, HW, HW))
    q = b.op("QuantizeLinear", [x, b.constant("sx", np.array(SX, np.float32)),
                                b.constant("zx", np.array(ZX, np.int8))], output_dtype="i8")
    a = b.op("ConvInteger", [q, b.constant("wq1", p["wq1"]), b.constant("zxc", np.array(ZX, np.int8))],
             pads=(1, 1, 1, 1))
    a = b.op("Add", [a, b.constant("bq1", p["bq1"].reshape(1, M1, 1, 1))])
    r = b.op("Relu", [_requant(b, a, "1", SX * p["sw1"].astype(np.float64) / S1, 0)])
    pool = b.op("MaxPool", [r], kernel_shape=(2, 2), strides=(2, 2))
    a = b.op("ConvInteger", [pool, b.constant("wq2", p["wq2"])], pads=(1, 1, 1, 1))
    a = b.op("Add", [a, b.constant("bq2", p["bq2"].reshape(1, M2, 1, 1))])
    y = _requant(b, a, "2", S1 * p["sw2"].astype(np.float64) / S2, Z2)
    b.output(b.op("DequantizeLinear", [y, b.constant("s2", np.array(S2, np.float32)),
                                       b.constant("z2", np.array(Z2, np.int8))]))
    return b.build()


def _float_graph(n: int) -> ob.Graph:
    """The float CNN the QDQ model quantizes (dequantized weights and biases)."""
    p = _params()
    b = ob.GraphBuilder("float_cnn")
    x = b.input("x", "f32", (n, C_IN, HW, HW))
    h = x
    for i, pool in (("1", True), ("2", False)):
        w = p[f"wq{i}"].astype(np.float32) * p[f"sw{i}"].reshape(-1, 1, 1, 1)
        h = b.op("Conv", [h, b.constant(f"w{i}", w), b.constant(f"b{i}", (p[f"bq{i}"] * p[f"bs{i}"]).astype(np.float32))],
                 pads=(1, 1, 1, 1))
        if pool:
            h = b.op("MaxPool", [b.op("Relu", [h])], kernel_shape=(2, 2), strides=(2, 2))
    b.output(h)
    return b.build()


def _ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def _check(g: ob.Graph, n: int, lmem: int | None) -> ob.Program:
    x = np.random.default_rng(n).normal(0, 1.0, (n, C_IN, HW, HW)).astype(np.float32)
    target = ob.Target.preset("bm1684", **({"lmem_bytes_per_lane": lmem} if lmem else {}))
    prog = ob.compile(g, target=target)
    got = prog.run({"x": x})[g.outputs[0].name]
    np.testing.assert_array_equal(got, ob.interpret(g, {"x": x})[g.outputs[0].name])
    ref = _ort(_qdq_model(n), x)
    steps = np.abs(np.rint(got / S2) - np.rint(ref / S2))
    assert steps.max() <= 1, f"{int((steps > 1).sum())} outputs differ from onnxruntime by > 1 LSB"
    assert (steps == 0).mean() > 0.99
    # at batch 4 the QuantizeLinear and the DequantizeLinear tile with none of their neighbours:
    # a group of one layer each, which runs as a global layer (as TPU-MLIR runs a one-op group)
    assert {u.op for u in prog.units if isinstance(u, GlobalUnit)} <= {"QuantizeLinear", "DequantizeLinear"}
    return prog


@pytest.mark.parametrize("lmem", [None, 2048], ids=["whole", "tiled"])
@pytest.mark.parametrize("n", [1, 4], ids=["n=1", "n=4"])
def test_qdq_cnn_int8_on_the_simulator(n: int, lmem: int | None) -> None:
    prog = _check(_integer_graph(n), n, lmem)
    groups = [u for u in prog.units if isinstance(u, GroupUnit)]
    assert any("ConvInteger" in [prog.graph.node(x).op for x in u.nodes] for u in groups)
    if lmem:
        assert sum(u.tiles for u in groups) > len(groups)


@pytest.mark.parametrize("n", [1, 4], ids=["n=1", "n=4"])
def test_int8_groups_move_fewer_gdma_bytes_than_float(n: int) -> None:
    """Same CNN, same target: the int8 program loads int8 weights (a quarter of the f32 bytes)
    and, at batch 4, int8 activations (a quarter per row). The float program's second Conv
    tiles with none of its neighbours: alone, it runs as a global layer."""
    t = ob.Target.preset("bm1684", lmem_bytes_per_lane=2048)
    pi, pf = ob.compile(_integer_graph(n), target=t), ob.compile(_float_graph(n), target=t)
    wi = {i.tensor: i.bytes for i in pi.instrs if isinstance(i, Load) and i.const}
    wf = {i.tensor: i.bytes for i in pf.instrs if isinstance(i, Load) and i.const}
    assert (wi["wq1"], wi["wq2"]) == (M1 * C_IN * 9, M2 * M1 * 9)
    assert wf["w1"] == 4 * wi["wq1"] and "w2" not in wf
    (conv2,) = [u for u in pf.units if isinstance(u, GlobalUnit)]
    assert conv2.op == "Conv" and pf.graph.node(conv2.nodes[0]).inputs[1].name == "w2"
    gi, gf = pi.profile().gdma_bytes, pf.profile().gdma_bytes
    assert gi < gf, (gi, gf)


@pytest.mark.skipif("fold_qdq" not in PASSES, reason="the fold_qdq pass (DQ-op-Q -> integer ops) "
                    "is not registered in this build")
@pytest.mark.parametrize("n", [1, 4], ids=["n=1", "n=4"])
def test_qdq_model_folded_by_the_pass(n: int) -> None:
    from opbridge.ir.passes import with_passes

    g = ob.convert(_qdq_model(n), passes=with_passes(["fold_qdq"]))
    assert "ConvInteger" in {node.op for node in g.nodes}
    _check(g, n, 2048)


def test_int8_program_saved_and_loaded_runs_the_same(tmp_path) -> None:
    """An int8 program (i8/i32 weights, the 4N target) round-trips through .obprog."""
    g = _integer_graph(4)
    prog = ob.compile(g, target=ob.Target.preset("bm1684", lmem_bytes_per_lane=2048))
    prog.save(tmp_path / "int8.obprog")
    again = ob.load_program(tmp_path / "int8.obprog")
    assert again.target.int8_batch_pack == 4
    x = np.random.default_rng(0).normal(0, 1.0, (4, C_IN, HW, HW)).astype(np.float32)
    name = g.outputs[0].name
    np.testing.assert_array_equal(again.run({"x": x})[name], prog.run({"x": x})[name])
    assert again.profile().gdma_bytes == prog.profile().gdma_bytes


# -- models quantized by onnxruntime's quantize_static ----------------------------------------
def _float_onnx(n: int) -> onnx.ModelProto:
    rng = np.random.default_rng(21)
    inits = [numpy_helper.from_array(rng.normal(0, s, shape).astype(np.float32), name) for name, shape, s in (
        ("w1", (16, 3, 3, 3), 0.3), ("b1", (16,), 0.1), ("w2", (8, 16, 3, 3), 0.1), ("b2", (8,), 0.1))]
    mk = helper.make_node
    nodes = [mk("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), mk("Relu", ["c1"], ["r1"]),
             mk("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             mk("Conv", ["p1", "w2", "b2"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "float_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, 8, 16, 16])],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _quantize_static(tmp_path, n: int, fmt: str) -> tuple[str, float]:
    """The float CNN quantized by onnxruntime (per channel, int8, MinMax on four samples);
    returns the model's path and its output's dequantization scale."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(5)
            self.feeds = iter([{"x": rng.normal(0, 1, (n, 3, 32, 32)).astype(np.float32)} for _ in range(4)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    src, dst = tmp_path / "float.onnx", tmp_path / f"int8_{fmt}.onnx"
    onnx.save(_float_onnx(n), src)
    quantize_static(str(src), str(dst), Reader(), quant_format=getattr(QuantFormat, fmt), per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    model = onnx.load(dst)
    (last,) = [nd for nd in model.graph.node if nd.output[0] == "y"]
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return str(dst), float(inits[last.input[1]])


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("n", [1, 4], ids=["n=1", "n=4"])
def test_onnxruntime_quantize_static_model_on_the_simulator(tmp_path, n: int, fmt: str) -> None:
    """A model onnxruntime's quantize_static wrote converts, and its int8 ops run in tiled
    layer groups: the simulator equals the interpreter bit for bit (QOperator's integer ops,
    or QDQ folded by ``fold_qdq`` where it is registered) and onnxruntime within one step of
    the output scale."""
    path, scale = _quantize_static(tmp_path, n, fmt)
    folded = fmt == "QOperator" or "fold_qdq" in PASSES
    if fmt == "QDQ" and folded:
        from opbridge.ir.passes import with_passes

        g = ob.convert(path, passes=with_passes(["fold_qdq"]))
    else:
        g = ob.convert(path)
    assert ("ConvInteger" in {nd.op for nd in g.nodes}) == folded
    x = np.random.default_rng(9).normal(0, 1, (n, 3, 32, 32)).astype(np.float32)
    prog = ob.compile(g, target=ob.Target.preset("bm1684", lmem_bytes_per_lane=2048))
    assert prog.profile().num_tiles > prog.profile().num_layer_groups
    # at batch 4 the QuantizeLinear and the DequantizeLinear tile with none of their neighbours:
    # a one-op group each, which runs as a global layer
    assert {u.op for u in prog.units if isinstance(u, GlobalUnit)} <= {"QuantizeLinear", "DequantizeLinear"}
    got, want = prog.run({"x": x})["y"], ob.interpret(g, {"x": x})["y"]
    if folded:  # integer arithmetic: the same bits
        np.testing.assert_array_equal(got, want)
    else:  # float convolutions between Q/DQ: a tile's summation order may move one step
        assert np.abs(got - want).max() <= scale * 1.001
    ref = _ort_path(path, x)
    assert np.abs(got - ref).max() <= scale * 1.001, np.abs(got - ref).max() / scale


def _ort_path(path: str, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
