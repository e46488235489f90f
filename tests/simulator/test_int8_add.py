"""The residual Add of an int8 network in integers: ``fold_qdq`` turns DequantizeLinear(a),
DequantizeLinear(b) -> Add (-> Relu) -> QuantizeLinear into QAdd, and the simulator runs it in
the int8 layer groups.

References: onnxruntime running the QDQ model with its graph optimizations off (so it computes
the dequantize, the f32 Add and the quantize as written), and, for the op alone, the same
formula written here in float64 from the ONNX definitions of the two DequantizeLinear, the Add
and the QuantizeLinear. The integer op may differ from them by one step where the real sum lies
within rounding error of a half step; the tests bound that, and require the simulator to equal
the interpreter bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.ir.ops.quant import qadd_params
from opbridge.ir.passes import with_passes
from opbridge.simulator import GroupUnit

from ..conftest import requires_ort

HW = 16
RANGES = {"i8": (-128, 127), "u8": (0, 255)}


# -- the op against the float formula ---------------------------------------------------------
def _qadd_graph(shape: tuple[int, ...], sa: float, za: int, sb: float, zb: int, sy: float, zy: int,
                relu: bool, dtype: str = "i8", then_identity: bool = False) -> ob.Graph:
    """a, b -> QAdd [-> Identity]: with ``then_identity`` the QAdd shares its layer group with
    a layer that keeps its bytes (alone it would be a one-op group, run as a global layer)."""
    mult, shift = qadd_params(sa, sb, sy)
    b = ob.GraphBuilder("qadd")
    a, c = b.input("a", dtype, shape), b.input("b", dtype, shape)
    y = b.op("QAdd", [a, c], a_zero_point=za, b_zero_point=zb, y_zero_point=zy,
             multipliers=mult, shifts=shift, relu=int(relu), output_dtype=dtype)
    b.output(b.op("Identity", [y]) if then_identity else y)
    return b.build()


def _float_add(a: np.ndarray, b: np.ndarray, sa: float, za: int, sb: float, zb: int, sy: float,
               zy: int, relu: bool, lo: int, hi: int) -> np.ndarray:
    """Q(DQ(a) + DQ(b)), ReLU before Q when asked: the ONNX ops' formulas in float64."""
    real = (a.astype(np.float64) - za) * sa + (b.astype(np.float64) - zb) * sb
    if relu:
        real = np.maximum(real, 0.0)
    return np.clip(np.rint(real / sy) + zy, lo, hi)


CASES = {  # sa, za, sb, zb, sy, zy, relu, dtype
    "i8 symmetric": (0.031, 0, 0.047, 0, 0.06, 0, False, "i8"),
    "i8 relu": (0.02, 0, 0.09, 0, 0.05, -128, True, "i8"),
    "u8 zero points": (0.011, 131, 0.017, 120, 0.025, 97, False, "u8"),
    "u8 relu": (0.011, 131, 0.017, 120, 0.025, 97, True, "u8"),
    "equal scales": (0.05, 0, 0.05, 0, 0.05, 0, False, "i8"),
    "output finer than inputs": (0.2, 3, 0.15, -4, 0.01, 5, False, "i8"),
}


@pytest.mark.parametrize("case", CASES)
def test_qadd_within_one_step_of_the_float_add(case: str) -> None:
    sa, za, sb, zb, sy, zy, relu, dtype = CASES[case]
    lo, hi = (-128, 127) if dtype == "i8" else (0, 255)
    npdt = np.int8 if dtype == "i8" else np.uint8
    # every pair of 8-bit values once
    a, b = np.meshgrid(np.arange(lo, hi + 1), np.arange(lo, hi + 1), indexing="ij")
    a, b = a.astype(npdt).reshape(1, 256, 16, 16), b.astype(npdt).reshape(1, 256, 16, 16)
    g = _qadd_graph(a.shape, sa, za, sb, zb, sy, zy, relu, dtype)
    got = ob.interpret(g, {"a": a, "b": b})[g.outputs[0].name].astype(np.int64)
    want = _float_add(a, b, sa, za, sb, zb, sy, zy, relu, lo, hi)
    diff = np.abs(got - want)
    assert diff.max() <= 1
    # a differing value is a near tie: the real sum within 1e-4 step of a half step
    real = ((a.astype(np.float64) - za) * sa + (b.astype(np.float64) - zb) * sb) / sy
    frac = np.abs(real - np.floor(real) - 0.5)
    assert np.all(frac[diff > 0] < 1e-4), frac[diff > 0].max()
    assert (diff == 0).mean() > 0.99


@pytest.mark.parametrize("rank", [4, 3], ids=["NCHW", "tokens"])
@pytest.mark.parametrize("lmem", [None, 1024], ids=["whole", "tiled"])
@pytest.mark.parametrize("n", [1, 4], ids=["n=1", "n=4"])
@pytest.mark.parametrize("case", ["i8 relu", "u8 zero points"])
def test_qadd_on_the_simulator_equals_the_interpreter(case: str, n: int, lmem: int | None,
                                                      rank: int) -> None:
    """Bit for bit, whole and in tiles, on an NCHW tensor and on a transformer's (batch,
    tokens, features) residual."""
    sa, za, sb, zb, sy, zy, relu, dtype = CASES[case]
    lo, hi = (-128, 127) if dtype == "i8" else (0, 255)
    npdt = np.int8 if dtype == "i8" else np.uint8
    shape: tuple[int, ...] = (n, 80, HW, HW) if rank == 4 else (n, 128, 512)
    g = _qadd_graph(shape, sa, za, sb, zb, sy, zy, relu, dtype, then_identity=True)
    rng = np.random.default_rng(n)
    feeds = {k: rng.integers(lo, hi + 1, shape).astype(npdt) for k in ("a", "b")}
    prog = ob.compile(g, target=ob.Target.preset("bm1684", **({"lmem_bytes_per_lane": lmem} if lmem else {})))
    name = g.outputs[0].name
    np.testing.assert_array_equal(prog.run(feeds)[name], ob.interpret(g, feeds)[name])
    p = prog.profile()
    assert p.num_global_layers == 0 and p.num_layer_groups == 1
    if lmem:
        assert p.num_tiles > 1


def test_qadd_rejects_inputs_of_two_shapes_and_left_shifted_inputs() -> None:
    b = ob.GraphBuilder("bad")
    x, y = b.input("x", "i8", (1, 4, 2, 2)), b.input("y", "i8", (1, 4, 2, 1))
    with pytest.raises(ob.OpbridgeError, match="one shape"):
        b.op("QAdd", [x, y], multipliers=(1 << 30,) * 3, shifts=(1, 1, 1))
    with pytest.raises(ob.OpbridgeError, match="shift >= 0"):
        b.op("QAdd", [x, x], multipliers=(1 << 30,) * 3, shifts=(-1, 1, 1))


# -- a ResNet-like block quantized by onnxruntime ------------------------------------------------
def _resnet_block(n: int) -> onnx.ModelProto:
    """stem Conv-Relu, a bottleneck with an identity shortcut, one with a strided Conv
    shortcut, each ending Add-Relu, and a head Conv reading the last (so every Add's output is
    quantized as a Conv's input)."""
    rng = np.random.default_rng(7)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    mk = helper.make_node

    def conv(src: str, dst: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True) -> str:
        w = rng.normal(0, (2.0 / (cin * k * k)) ** 0.5, (cout, cin, k, k)).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, f"{dst}_w"),
                      numpy_helper.from_array(rng.normal(0, 0.1, cout).astype(np.float32), f"{dst}_b")])
        out = f"{dst}_c" if relu else dst
        nodes.append(mk("Conv", [src, f"{dst}_w", f"{dst}_b"], [out], pads=[k // 2] * 4,
                        strides=[stride, stride]))
        if relu:
            nodes.append(mk("Relu", [out], [dst]))
        return dst

    def block(src: str, tag: str, cin: int, cout: int, stride: int) -> str:
        h = conv(src, f"{tag}a", cin, cout // 2, 1)
        h = conv(h, f"{tag}b", cout // 2, cout // 2, 3, stride)
        h = conv(h, f"{tag}c", cout // 2, cout, 1, relu=False)
        short = src if stride == 1 and cin == cout else conv(src, f"{tag}s", cin, cout, 1, stride, relu=False)
        nodes.append(mk("Add", [h, short], [f"{tag}_sum"]))
        nodes.append(mk("Relu", [f"{tag}_sum"], [f"{tag}_out"]))
        return f"{tag}_out"

    h = conv("x", "stem", 3, 32, 3)
    h = block(h, "b1", 32, 32, 1)
    h = block(h, "b2", 32, 64, 2)
    conv(h, "y", 64, 16, 1, relu=False)
    graph = helper.make_graph(nodes, "resnet_block",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 3, HW, HW])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, 16, HW // 2, HW // 2])],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _quantize_static(tmp_path: Path, n: int) -> tuple[str, float]:
    """The block quantized by onnxruntime (QDQ, per channel, int8, MinMax on four samples);
    the model's path and its output's scale."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(5)
            self.feeds = iter([{"x": rng.normal(0, 1, (n, 3, HW, HW)).astype(np.float32)} for _ in range(4)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    src, dst = tmp_path / "float.onnx", tmp_path / "int8.onnx"
    onnx.save(_resnet_block(n), src)
    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    model = onnx.load(dst)
    (last,) = [nd for nd in model.graph.node if nd.output[0] == "y"]
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return str(dst), float(inits[last.input[1]])


def _ort_unoptimized(path: str, x: np.ndarray) -> np.ndarray:
    """onnxruntime with graph optimizations off: the QDQ model's DQ-Add-Q run as written, in f32."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _ort_cut(path: str, tmp_path: Path, inputs: list[str], output: str,
             feeds: dict[str, np.ndarray]) -> np.ndarray:
    """onnxruntime, graph optimizations off, on the part of the QDQ model from the tensors
    ``inputs`` to ``output``: its DequantizeLinear, Add and QuantizeLinear as written, in f32."""
    import onnxruntime as ort

    cut = tmp_path / f"cut_{output}.onnx"
    onnx.utils.extract_model(path, str(cut), inputs, [output])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(cut), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


@requires_ort
@pytest.mark.parametrize("n", [1, 4], ids=["n=1", "n=4"])
def test_residual_add_of_an_onnxruntime_qdq_model_runs_in_int8(tmp_path: Path, n: int) -> None:
    """Both Adds of the block fold (onnxruntime's quantizer drops the Relu after each, taking
    it into the output's range); each QAdd, fed the integers our graph gives it, is within one
    step of onnxruntime running that DQ-Add-Q; the simulator equals the interpreter bit for
    bit, with the QAdds in int8 layer groups."""
    path, scale = _quantize_static(tmp_path, n)
    adds = sum(nd.op_type == "Add" for nd in onnx.load(path).graph.node)
    g = ob.convert(path, passes=with_passes(["fold_qdq"]))
    qadds = [nd for nd in g.nodes if nd.op == "QAdd"]
    assert len(qadds) == adds == 2
    assert [nd.op for nd in g.nodes].count("DequantizeLinear") == 1  # the graph output's only
    x = np.random.default_rng(9).normal(0, 1, (n, 3, HW, HW)).astype(np.float32)
    got = ob.interpret(g, {"x": x}, keep_intermediates=True)
    for nd in qadds:
        ins = [v.name for v in nd.inputs if v is not None]
        ref = _ort_cut(path, tmp_path, ins, nd.outputs[0].name, {k: got[k] for k in ins})
        steps = np.abs(got[nd.outputs[0].name].astype(np.int64) - ref.astype(np.int64))
        assert steps.max() <= 1 and (steps == 0).mean() > 0.99, (nd.name, steps.max(), (steps == 0).mean())
    # the whole model: the convolutions' fixed-point requantizations round where onnxruntime's
    # f32 ones do not, and a step's difference carries on through the layers after it
    ref = _ort_cut(path, tmp_path, ["x"], "y", {"x": x})
    steps = np.abs(np.rint(got["y"] / scale) - np.rint(ref / scale))
    assert steps.max() <= 2 and (steps == 0).mean() > 0.9
    prog = ob.compile(g, target=ob.Target.preset("bm1684", lmem_bytes_per_lane=4096))
    np.testing.assert_array_equal(prog.run({"x": x})["y"], got["y"])
    # each QAdd runs in a layer group, its 8-bit inputs and output in local memory
    nodes = [prog.graph.node(nm) for u in prog.units if isinstance(u, GroupUnit) for nm in u.nodes]
    grouped = [nd for nd in nodes if nd.op == "QAdd"]
    assert len(grouped) == 2 and prog.profile().num_global_layers == 0
    assert all(v.dtype == "i8" for nd in grouped for v in [*nd.inputs, *nd.outputs] if v is not None)


@pytest.mark.parametrize("n", [1, 4], ids=["n=1", "n=4"])
def test_quantize_folds_add_relu_into_qadd(n: int) -> None:
    """``ob.quantize`` leaves each residual Add-Relu between DequantizeLinear and
    QuantizeLinear; the fold makes it one QAdd with ``relu``, within one step of the ONNX
    formula (DQ, Add, Relu, Q in float64) on the integers it is fed, and the simulator runs it
    bit for bit as the interpreter."""
    g = ob.convert(_resnet_block(n))
    rng = np.random.default_rng(1)
    table = ob.calibrate(g, [{"x": rng.normal(0, 1, (n, 3, HW, HW)).astype(np.float32)} for _ in range(3)])
    q = ob.quantize(g, table, dtype="int8")
    qadds = [nd for nd in q.nodes if nd.op == "QAdd"]
    assert len(qadds) == 2 and all(nd.attrs["relu"] == 1 for nd in qadds)
    assert "Add" not in [nd.op for nd in q.nodes if nd.outputs[0].dtype == "f32"]
    x = {"x": rng.normal(0, 1, (n, 3, HW, HW)).astype(np.float32)}
    got = ob.interpret(q, x, keep_intermediates=True)
    for nd in qadds:
        a, b, y = nd.inputs[0], nd.inputs[1], nd.outputs[0]
        assert a is not None and b is not None and a.quant and b.quant and y.quant
        want = _float_add(got[a.name], got[b.name], float(a.quant.scale), int(a.quant.zero_point),
                          float(b.quant.scale), int(b.quant.zero_point), float(y.quant.scale),
                          int(y.quant.zero_point), True, *RANGES[y.dtype])
        steps = np.abs(got[y.name].astype(np.int64) - want)
        assert steps.max() <= 1 and (steps == 0).mean() > 0.99
    prog = ob.compile(q, target=ob.Target.preset("bm1684", lmem_bytes_per_lane=4096))
    out = q.outputs[0].name
    np.testing.assert_array_equal(prog.run(x)[out], got[out])


@pytest.mark.parametrize("target,n", [("bm1684x", 1), ("bm1684x", 4), ("bm1684", 4)])
def test_qadd_moves_int8_bytes(target: str, n: int) -> None:
    """One QAdd: its group loads two 8-bit inputs and stores an 8-bit output, one byte an
    element (batch 4 fills BM1684's 4N packing), a quarter of an f32 Add's bytes."""
    shape = (n, 80, HW, HW)
    g = _qadd_graph(shape, 0.1, 0, 0.2, 0, 0.3, 0, False)
    b = ob.GraphBuilder("f32_add")
    b.output(b.op("Add", [b.input("a", "f32", shape), b.input("b", "f32", shape)]))
    pq, pf = ob.compile(g, target=target).profile(), ob.compile(b.build(), target=target).profile()
    assert pq.gdma_bytes == 3 * int(np.prod(shape)) == pf.gdma_bytes // 4


def test_qadd_and_lut_survive_obir_and_obprog(tmp_path: Path) -> None:
    mult, shift = qadd_params(0.05, 0.07, 0.09)
    b = ob.GraphBuilder("qadd_lut")
    x, y = b.input("x", "i8", (4, 8, 6, 6)), b.input("y", "i8", (4, 8, 6, 6))
    s = b.op("QAdd", [x, y], a_zero_point=-3, b_zero_point=5, y_zero_point=-128,
             multipliers=mult, shifts=shift, relu=1, output_dtype="i8")
    table = np.random.default_rng(0).integers(-128, 128, 256).astype(np.int8)
    b.output(b.op("Lut", [s, b.constant("table", table)]))
    g = b.build()
    ob.save(g, tmp_path / "g.obir")
    g2 = ob.load(tmp_path / "g.obir")
    rng = np.random.default_rng(2)
    feeds = {k: rng.integers(-128, 128, (4, 8, 6, 6)).astype(np.int8) for k in ("x", "y")}
    name = g.outputs[0].name
    want = ob.interpret(g, feeds)[name]
    np.testing.assert_array_equal(ob.interpret(g2, feeds)[name], want)
    prog = ob.compile(g2, target="bm1684")
    prog.save(tmp_path / "g.obprog")
    np.testing.assert_array_equal(ob.load_program(tmp_path / "g.obprog").run(feeds)[name], want)
