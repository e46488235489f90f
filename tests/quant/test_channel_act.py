"""Per-channel activation scales where the chip takes them for free (a Conv's output read by
float ops, a depthwise Conv's input): the int8 model against onnxruntime running a QDQ model
this test writes from the scheme's definition, with the channel ranges from numpy over
onnxruntime's own tensors; the integer fold and the simulator on it; the table's channel
ranges; which tensors the rule leaves per tensor."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.quant import CalibrationTable, QuantError
from opbridge.quant.calibrate import prepared
from opbridge.quant.int8 import channel_points, quant_points, quantizable, to_int8
from tests.conftest import requires_ort
from tests.quant.helpers import cnn_model, cos, ort_all_tensors, ort_outputs, scheme_weights

C = 8
#: Output-channel gains of the first Conv: after BatchNorm folding a MobileNet block's channels
#: differ by decades like this (a PP-PicoDet stem: 0.1 against 30).
GAINS = np.array([0.02, 0.05, 0.3, 1.0, 2.0, 5.0, 12.0, 30.0], np.float32)


def _hardswish(x: str, y: str, op: bool) -> list[onnx.NodeProto]:
    """HardSwish as one op, or as paddle2onnx exports it (PP-PicoDet, PP-OCR): x * Clip(x + 3,
    0, 6) / 6 in four element-wise ops, which the target runs in float."""
    if op:
        return [helper.make_node("HardSwish", [x], [y])]
    return [helper.make_node("Add", [x, "three"], [f"{y}_a"]), helper.make_node("Clip", [f"{y}_a", "zero", "six"], [f"{y}_c"]),
            helper.make_node("Mul", [x, f"{y}_c"], [f"{y}_m"]), helper.make_node("Div", [f"{y}_m", "six"], [y])]


def block_model(hardswish_op: bool = False) -> onnx.ModelProto:
    """pointwise Conv -> hard-swish -> depthwise Conv -> hard-swish -> pointwise Conv."""
    rng = np.random.default_rng(5)
    w1 = (rng.standard_normal((C, 4, 1, 1)) * GAINS.reshape(-1, 1, 1, 1) / 2).astype(np.float32)
    b1 = (rng.standard_normal(C) * GAINS / 4).astype(np.float32)
    wd = (rng.standard_normal((C, 1, 3, 3)) / GAINS.reshape(-1, 1, 1, 1) / 3).astype(np.float32)
    bd = (rng.standard_normal(C) * 0.1).astype(np.float32)
    w3 = (rng.standard_normal((4, C, 1, 1)) * 0.3).astype(np.float32)
    b3 = (rng.standard_normal(4) * 0.1).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w1, "w1"), (b1, "b1"), (wd, "wd"), (bd, "bd"), (w3, "w3"), (b3, "b3"), (np.float32(3), "three"),
              (np.float32(0), "zero"), (np.float32(6), "six")]]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="pw1"),
        *_hardswish("c1", "h1", hardswish_op),
        helper.make_node("Conv", ["h1", "wd", "bd"], ["dw"], name="dw", group=C, pads=[1, 1, 1, 1]),
        *_hardswish("dw", "h2", hardswish_op),
        helper.make_node("Conv", ["h2", "w3", "b3"], ["y"], name="pw2"),
    ]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 10, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 10, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def block_feeds(n: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, 4, 10, 10)).astype(np.float32)} for _ in range(n)]


#: Read off the block: the per-tensor points are the first and last Convs' inputs (pointwise
#: Convs sum over channels, so their input needs one scale); every other point is per channel.
PER_TENSOR = {"x", "h2"}
PER_CHANNEL = {"c1", "h1", "dw", "y"}
CONVS = {"pw1": ("w1", "b1"), "dw": ("wd", "bd"), "pw2": ("w3", "b3")}


def _qdq_block(model: onnx.ModelProto, calib: list[dict[str, np.ndarray]]) -> bytes:
    """The block in ONNX QDQ form, written from the scheme: minmax thresholds from numpy over
    onnxruntime's tensors on ``calib``; per-tensor points symmetric int8 at max|x|/127,
    per-channel points at each channel's max|x| / 127 (QuantizeLinear axis 1); weights
    per output channel max|W|/127; int32 biases at s_x * s_w per channel."""
    runs = [ort_all_tensors(model, f) for f in calib]
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    new, nodes = [], []

    def scale(name: str) -> np.ndarray:
        a = np.stack([np.abs(r[name][0]) for r in runs])  # samples, C, H, W
        per = a.max(axis=(0, 2, 3)) if name in PER_CHANNEL else np.asarray(a.max())
        return (per / 127).astype(np.float32)

    def qdq(name: str) -> None:
        s = scale(name)
        new.extend([numpy_helper.from_array(s, f"{name}_s"), numpy_helper.from_array(np.zeros(s.shape, np.int8), f"{name}_z")])
        nodes.extend([helper.make_node("QuantizeLinear", [name, f"{name}_s", f"{name}_z"], [f"{name}_q"], axis=1),
                      helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"], [f"{name}_d"], axis=1)])

    qdq("x")
    for node in model.graph.node:
        ins = [f"{i}_d" if i in PER_TENSOR | PER_CHANNEL else i for i in node.input]
        if node.name in CONVS:
            wn, bn = CONVS[node.name]
            w_inits, w_nodes, ins[1:3] = scheme_weights(inits[wn], inits[bn], scale(node.input[0]), wn, bn,
                                                        sep="_", dq="d")
            new.extend(w_inits)
            nodes.extend(w_nodes)
        nodes.append(helper.make_node(node.op_type, ins, list(node.output), name=node.name,
                                      **{a.name: helper.get_attribute_value(a) for a in node.attribute}))
        qdq(node.output[0])
    graph = helper.make_graph(nodes, "ref", list(model.graph.input),
                              [helper.make_tensor_value_info("y_d", TensorProto.FLOAT, [1, 4, 10, 10])],
                              list(model.graph.initializer) + new)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8).SerializeToString()


@pytest.fixture(scope="module")
def block():
    model = block_model()
    g = ob.convert(model)
    calib = block_feeds(6, seed=1)
    return model, g, calib, ob.calibrate(g, calib, method="minmax", channel_activations=True)


def test_channel_points_follow_the_rule(block):
    _, g, _, _ = block
    nodes = {n.name for n in g.nodes if quantizable(n)}
    points = quant_points(g, nodes)
    assert set(points) == PER_TENSOR | PER_CHANNEL
    assert channel_points(g, points, nodes) == PER_CHANNEL


def test_a_hardswish_op_keeps_one_scale_on_its_input():
    # one HardSwish op between two quantized tensors is an integer lookup table (fold_qdq's
    # Lut): its input needs one scale; the depthwise Conv's input and the last output do not
    g = prepared(ob.convert(block_model(hardswish_op=True)))
    nodes = {n.name for n in g.nodes if quantizable(n)}
    assert channel_points(g, quant_points(g, nodes), nodes) == {"h1", "y"}


def test_channel_points_leave_integer_readers_per_tensor():
    # the small CNN: conv2a's output is read by a Relu whose output is quantized (it runs on the
    # integers: one scale), pool1_out and relu2a_out by non-depthwise Convs; conv1's output is
    # read by a LeakyRelu and conv2b's by the residual Add, both running in float
    g = prepared(ob.convert(cnn_model()))
    nodes = {n.name for n in g.nodes if quantizable(n)}
    assert channel_points(g, quant_points(g, nodes), nodes) == {"conv1_out", "conv2b_out"}


@requires_ort
def test_channel_scales_match_onnxruntime_running_the_scheme(block):
    model, g, calib, table = block
    q = ob.quantize(g, table)
    ref = _qdq_block(model, calib)
    for f in block_feeds(4, seed=9):
        want = ort_outputs(ref, f)["y_d"]
        got = ob.interpret(q, f)["y"]
        # the integer graph rounds a requantization's exact halves away from zero where the
        # QDQ graph rounds them to even: a step at most, on a few elements
        step = float(scale_of(q, "y").max())
        assert np.abs(got - want).max() <= step * 1.01
        assert np.mean(np.abs(got - want) > 1e-5) < 0.01


def scale_of(q: ob.Graph, name: str) -> np.ndarray:
    v = next(v for n in q.nodes for v in n.outputs if v.quant is not None and v.name.startswith(f"{name}/"))
    return np.asarray(v.quant.scale)


def test_channel_scales_fold_into_integer_ops_and_run_on_the_simulator(block):
    _, g, _, table = block
    q = ob.quantize(g, table)
    integer = {n.origin.name for n in q.nodes if n.op == "ConvInteger"}
    assert integer == {"pw1", "dw", "pw2"}
    assert not any(n.op == "Conv" for n in q.nodes)
    requant = {_conv_of(n).origin.name: n for n in q.nodes if n.op == "Requantize"}
    assert requant["dw"].inputs[1].data.size == C  # the input's channel scales in its multipliers
    prog = ob.compile(q, target="bm1684")
    for f in block_feeds(2, seed=4):
        np.testing.assert_array_equal(prog.run(f)["y"], ob.interpret(q, f)["y"])


def _conv_of(requantize: ob.Node) -> ob.Node:
    """The ConvInteger whose accumulator ``requantize`` reads (through the bias Add)."""
    node = requantize.inputs[0].producer
    while node.op != "ConvInteger":
        node = node.inputs[0].producer
    return node


def _without_channels(table: CalibrationTable) -> CalibrationTable:
    data = table.to_dict()
    for rec in data["tensors"].values():
        rec.pop("channel_max", None)
    return CalibrationTable.from_dict(data)


def test_channel_scales_beat_one_scale_per_tensor(block):
    _, g, _, table = block
    # per-channel weights both; activations per tensor (a table without channel ranges)
    per_tensor = ob.quantize(g, _without_channels(table))
    per_channel = ob.quantize(g, table)
    worst_tensor = worst_channel = 1.0
    for f in block_feeds(4, seed=13):
        want = ob.interpret(g, f)["y"]
        worst_tensor = min(worst_tensor, cos(want, ob.interpret(per_tensor, f)["y"]))
        worst_channel = min(worst_channel, cos(want, ob.interpret(per_channel, f)["y"]))
    # the narrow channels (gain 0.02) share one scale with the wide ones (gain 30) per tensor
    assert worst_tensor < 0.9 < 0.99 < worst_channel


def test_per_tensor_quantizes_activations_per_tensor(block):
    _, g, _, table = block
    q = to_int8(prepared(g), table, per_channel=False, fold_integer=False)
    assert all(n.inputs[1].data.size == 1 for n in q.nodes if n.op == "QuantizeLinear")


@requires_ort
def test_calibration_records_channel_ranges(block, tmp_path):
    model, g, calib, table = block
    runs = [ort_all_tensors(model, f) for f in calib]
    for name in ("c1", "h1", "dw", "y"):
        want = np.max([np.abs(r[name]).max(axis=(0, 2, 3)) for r in runs], axis=0)
        np.testing.assert_allclose(table[name].channels, want, rtol=1e-5, atol=1e-6, err_msg=name)
    table.save(tmp_path / "t.json")
    back = CalibrationTable.load(tmp_path / "t.json")
    assert back["h1"].channels == table["h1"].channels


def test_table_without_channel_ranges_quantizes_per_tensor(block):
    _, g, calib, table = block
    assert all(r.channels is None for r in ob.calibrate(g, calib).tensors.values())  # the default
    q = to_int8(prepared(g), _without_channels(table), fold_integer=False)
    assert all(n.inputs[1].data.size == 1 for n in q.nodes if n.op == "QuantizeLinear")


@pytest.mark.parametrize("bad", [[], ["a"], [1.0, -2.0], [float("nan")], "123"])
def test_bad_channel_ranges_are_refused(block, tmp_path, bad):
    _, _, _, table = block
    data = table.to_dict()
    data["tensors"]["h1"]["channel_max"] = bad
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    with pytest.raises(QuantError, match="channel_max"):
        CalibrationTable.load(path)


def test_channel_ranges_of_another_width_are_refused(block):
    """A table whose channel ranges do not match the graph's channels (another model, another
    --input-shape, a hand edit) is refused naming the tensor, with the hint to recalibrate."""
    _, g, _, table = block
    data = table.to_dict()
    data["tensors"]["h1"]["channel_max"] = [1.0, 2.0, 3.0]
    with pytest.raises(QuantError, match="'h1' has 3 channel ranges") as err:
        to_int8(prepared(g), CalibrationTable.from_dict(data), fold_integer=False)
    assert "calibrate this model" in err.value.hint


def test_cli_calibrate_channel_activations(block, tmp_path):
    from opbridge.cli import main

    model, _, calib, _ = block
    onnx.save(model, tmp_path / "block.onnx")
    (tmp_path / "data").mkdir()
    for i, f in enumerate(calib):
        np.save(tmp_path / "data" / f"s{i}.npy", f["x"])
    for flag, per_channel in (([], False), (["--channel-activations"], True)):
        table, out = tmp_path / f"t{per_channel}.json", tmp_path / f"q{per_channel}.obir"
        assert main(["calibrate", str(tmp_path / "block.onnx"), "--data", str(tmp_path / "data"), *flag,
                     "-o", str(table)]) == 0
        assert ("channel_max" in json.loads(table.read_text())["tensors"]["h1"]) == per_channel
        assert main(["quantize", str(tmp_path / "block.onnx"), "--table", str(table), "-o", str(out)]) == 0
        q = ob.load(out)
        scales = {v.quant.scale.size for n in q.nodes for v in n.outputs if v.quant is not None and v.dtype in ("i8", "u8")
                  and n.op in ("QuantizeLinear", "Requantize")}
        assert (C in scales) == per_channel
