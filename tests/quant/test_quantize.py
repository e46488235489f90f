"""ob.quantize: int8 (QDQ) against onnxruntime running the same scheme written as an ONNX QDQ
model by this test, f16/bf16 against onnxruntime's float run, mixed precision, bad input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.quant import CalibrationTable, QuantError, TensorRange
from tests.conftest import requires_ort
from tests.quant.helpers import cnn_model, cos, feeds, ort_outputs, scheme_weights

#: The activations the scheme quantizes in the small CNN, read off its structure: the inputs
#: and outputs of conv1, conv2a, conv2b and fc; conv2a's output, read only by a Relu, at the
#: Relu output's scale, and the Relu's output too; conv1 feeds a LeakyRelu, which is not fused.
CNN_POINTS = ["image", "conv1_out", "pool1_out", "conv2a_out", "relu2a_out", "conv2b_out", "flat_out",
              "logits"]
SCALE_OF = {"conv2a_out": "relu2a_out"}
CNN_WEIGHTS = {"conv1": ("conv1.w", "conv1.b", 0), "conv2a": ("conv2a.w", "conv2a.b", 0),
               "conv2b": ("conv2b.w", "conv2b.b", 0), "fc": ("fc.w", "fc.b", 0)}


@pytest.fixture(scope="module")
def cnn():
    model = cnn_model()
    g = ob.convert(model)
    return model, g, ob.calibrate(g, feeds(8), method="minmax")


def _qdq_reference(model: onnx.ModelProto, table: CalibrationTable, asymmetric: bool = False) -> bytes:
    """``model`` with ONNX QuantizeLinear/DequantizeLinear written here from the scheme's
    definition (symmetric int8 at threshold/127, or uint8 with zero point 0 at threshold/255
    for a tensor whose calibrated minimum is >= 0; with ``asymmetric`` the signed ones uint8
    over [max(min, -threshold), min(max, threshold)] with the zero point round(-lo / scale);
    per-channel weights max|W|/127, int32 bias at s_x*s_w)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    new_inits, nodes = [], []
    rename = {p: f"{p}__dq" for p in CNN_POINTS}

    def act_params(name: str) -> tuple[np.float32, np.generic]:
        r = table[SCALE_OF.get(name, name)]
        if r.min >= 0:
            return np.float32(r.threshold / 255), np.uint8(0)
        lo, hi = max(r.min, -r.threshold), min(r.max, r.threshold)
        if asymmetric and hi > 0:
            return np.float32((hi - lo) / 255), np.uint8(round(-lo / ((hi - lo) / 255)))
        return np.float32(r.threshold / 127), np.int8(0)

    def act_scale(name: str) -> np.float32:
        return act_params(name)[0]

    def qdq(name: str) -> list[onnx.NodeProto]:
        zero = act_params(name)[1]
        new_inits.extend([numpy_helper.from_array(act_scale(name), f"{name}__s"),
                          numpy_helper.from_array(zero, f"{name}__z")])
        return [helper.make_node("QuantizeLinear", [name, f"{name}__s", f"{name}__z"], [f"{name}__q"]),
                helper.make_node("DequantizeLinear", [f"{name}__q", f"{name}__s", f"{name}__z"], [rename[name]])]

    nodes += qdq("image")
    for node in g.node:
        ins = [rename.get(i, i) for i in node.input]
        if node.name in CNN_WEIGHTS:
            w_name, b_name, axis = CNN_WEIGHTS[node.name]
            w_inits, w_nodes, ins[1:3] = scheme_weights(inits[w_name], inits[b_name], act_scale(node.input[0]),
                                                        w_name, b_name, axis=axis)
            new_inits += w_inits
            nodes += w_nodes
        nodes.append(helper.make_node(node.op_type, ins, list(node.output), name=node.name,
                                      **{a.name: helper.get_attribute_value(a) for a in node.attribute}))
        nodes += [n for o in node.output if o in rename and o != "image" for n in qdq(o)]
    out = g.output[0].name
    graph = helper.make_graph(nodes, "ref", list(g.input), [helper.make_tensor_value_info(
        rename.get(out, out), TensorProto.FLOAT, [1, 10])], initializer=list(g.initializer) + new_inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()


@requires_ort
@pytest.mark.parametrize("asymmetric", [False, True])
def test_int8_matches_onnxruntime_running_the_scheme(cnn, asymmetric):
    from opbridge.quant.calibrate import prepared
    from opbridge.quant.int8 import to_int8

    model, g, table = cnn
    q = to_int8(prepared(g), table, asymmetric=True) if asymmetric else ob.quantize(g, table)
    if asymmetric:  # the signed activations really are uint8 with a zero point there
        assert any(n.op == "QuantizeLinear" and n.attrs["output_dtype"] == "u8" and n.inputs[2] is not None
                   and n.inputs[2].data is not None and int(n.inputs[2].data) > 0 for n in
                   to_int8(prepared(g), table, asymmetric=True, fold_integer=False).nodes)
    ref = _qdq_reference(model, table, asymmetric)
    for f in feeds(4, seed=7):
        want = next(iter(ort_outputs(ref, f).values()))
        got = ob.interpret(q, f)["prob"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_int8_cosine_on_held_out_inputs(cnn):
    _, g, table = cnn
    q = ob.quantize(g, table)
    assert q.metadata["quant.int8_layers"] == "conv1,conv2a,conv2b,fc"
    for f in feeds(4, seed=11):
        a = ob.interpret(g, f, keep_intermediates=True)
        b = ob.interpret(q, f, keep_intermediates=True)
        assert cos(a["logits"], b["logits"]) > 0.999
        assert cos(a["prob"], b["prob"]) > 0.9999


def test_int8_folds_into_integer_ops(cnn):
    _, g, table = cnn
    q = ob.quantize(g, table)
    integer = {n.origin.name: n.op for n in q.nodes if n.op in ("ConvInteger", "MatMulInteger")}
    assert integer == {"conv1": "ConvInteger", "conv2a": "ConvInteger", "conv2b": "ConvInteger",
                       "fc": "MatMulInteger"}
    assert not any(n.op in ("Conv", "Gemm", "MatMul") for n in q.nodes)
    relu = next(n for n in q.nodes if n.origin.name == "relu2a")
    assert relu.outputs[0].dtype == "u8"  # the Relu after conv2a runs on the (unsigned) integers


def test_int8_weights_and_biases(cnn):
    from opbridge.quant.int8 import to_int8

    _, g, table = cnn
    q = to_int8(g, table, fold_integer=False)  # the QDQ form, before fold_qdq
    consts = q.constants
    w = g.constants["conv2b.w"].data
    wq = consts["conv2b.w/int8"]
    assert wq.dtype == "i8" and np.abs(wq.data.astype(int)).max() == 127
    scale = np.abs(w).reshape(8, -1).max(axis=1) / 127
    np.testing.assert_allclose(consts["conv2b.w/int8/scale"].data, scale, rtol=1e-6)
    np.testing.assert_array_equal(wq.quant.scale, consts["conv2b.w/int8/scale"].data)
    bias = consts["conv2b.b/int32"]
    assert bias.dtype == "i32"
    np.testing.assert_allclose(consts["conv2b.b/int32/scale"].data,
                               scale * table["relu2a_out"].threshold / 255, rtol=1e-6)
    per_tensor = to_int8(g, table, per_channel=False, fold_integer=False)
    assert per_tensor.constants["conv2b.w/int8/scale"].data.shape == ()


def _damaged(table: CalibrationTable, *names: str) -> CalibrationTable:
    """``table`` with the outputs ``names`` (default conv2b's) clipped to a twentieth of their
    range: int8 then ruins the residual branch."""
    bad = dict(table.tensors)
    for name in names or ("conv2b_out",):
        r = bad[name]
        bad[name] = TensorRange(r.min, r.max, r.threshold / 20)
    return CalibrationTable(table.graph, table.method, table.samples, bad)


def test_mixed_precision_auto_keeps_the_damaged_layer_float(cnn):
    _, g, table = cnn
    damaged = _damaged(table)
    samples = feeds(3, seed=5)
    plain = ob.quantize(g, damaged)
    before = min(cos(ob.interpret(g, f)["prob"], ob.interpret(plain, f)["prob"]) for f in samples)
    mixed = ob.quantize(g, damaged, mixed_precision="auto", target_cos=0.9999, samples=samples)
    after = min(cos(ob.interpret(g, f)["prob"], ob.interpret(mixed, f)["prob"]) for f in samples)
    assert before < 0.9999 <= after
    kept = mixed.metadata["quant.auto_float_layers"].split(",")
    assert kept == ["conv2b"]  # the one damaged layer, ranked first, and no more
    # the score reached: the probabilities' cosine, and the logits before the Softmax with
    # their length counted, 1 - |a - b|^2 / (2 |a|^2)
    logits = []
    for f in samples:
        a = ob.interpret(g, f, keep_intermediates=True)["logits"].astype(np.float64)
        b = ob.interpret(mixed, f, keep_intermediates=True)["logits"].astype(np.float64)
        logits.append(1 - np.sum((a - b) ** 2) / (2 * np.sum(a ** 2)))
    assert float(mixed.metadata["quant.cosine"]) == pytest.approx(min(after, *logits), abs=1e-6)


@requires_ort
@pytest.mark.parametrize("dtype, tol", [("f16", 2e-3), ("bf16", 2e-2)])
def test_half_precision_vs_onnxruntime_float(cnn, dtype, tol):
    model, g, _ = cnn
    h = ob.quantize(g, None, dtype=dtype)
    ops = {n.name: n.outputs[0].dtype for n in h.nodes}
    assert ops["conv1"] == dtype and ops["fc"] == dtype and h.outputs[0].dtype == "f32"
    for f in feeds(3, seed=2):
        want = ort_outputs(model.SerializeToString(), f)["prob"]
        got = ob.interpret(h, f)["prob"]
        assert cos(got, want) > 0.9999
        np.testing.assert_allclose(got, want, atol=tol)


def test_op_without_a_half_kernel_stays_f32_between_casts():
    # Shrink has no bf16 kernel: it runs in f32 with a Cast before and after it
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Shrink", ["r"], ["s"], name="shrink", lambd=0.5),
             helper.make_node("Neg", ["s"], ["y"], name="neg")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    g = ob.convert(model)
    h = ob.quantize(g, None, dtype="bf16")
    dtypes = {n.name: (n.op, n.outputs[0].dtype) for n in h.nodes}
    assert dtypes["relu"] == ("Relu", "bf16") and dtypes["shrink"] == ("Shrink", "f32")
    assert dtypes["neg"] == ("Neg", "bf16")
    assert [n.op for n in h.nodes].count("Cast") == 4  # in, around Shrink (2), out
    assert h.metadata["quant.float_layers"] == "shrink"
    f = {"x": np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)}
    np.testing.assert_allclose(ob.interpret(h, f)["y"], ob.interpret(g, f)["y"], atol=2e-2)


def test_bad_quantize_arguments(cnn):
    _, g, table = cnn
    with pytest.raises(QuantError, match="quantization type 'int4' is not supported"):
        ob.quantize(g, table, dtype="int4")
    with pytest.raises(QuantError, match="int8 quantization needs a calibration table"):
        ob.quantize(g, None)
    with pytest.raises(QuantError, match="mixed_precision 'manual'"):
        ob.quantize(g, table, mixed_precision="manual")


def test_table_of_another_graph_is_refused(cnn):
    _, g, _ = cnn
    other = CalibrationTable("other", "minmax", 1, {"x": TensorRange(-1, 1, 1)})
    with pytest.raises(QuantError, match=r"table \(of graph 'other'\) has no range for 7 tensor"):
        ob.quantize(g, other)


def test_layer_errors_equal_the_model_with_only_that_layer_in_int8(cnn):
    from opbridge.quant.int8 import quantizable, to_int8
    from opbridge.quant.quantize import layer_errors

    _, g, table = cnn
    damaged = _damaged(table)
    samples = feeds(2, seed=5)
    acts = [ob.interpret(g, f, keep_intermediates=True) for f in samples]
    errors = layer_errors(g, damaged, acts, per_channel=True)
    # every layer's input clipped to a third of its range: each one's error is large enough to compare
    clipped = CalibrationTable(table.graph, table.method, table.samples,
                               {k: TensorRange(v.min, v.max, v.threshold / 3) for k, v in table.tensors.items()})
    layers = [n.name for n in g.nodes if quantizable(n)]
    assert set(errors) == set(layers)
    assert max(errors, key=errors.get) == "conv2b"
    errors = layer_errors(g, clipped, acts, per_channel=True)
    for name in layers:  # the whole QDQ model with every other layer float, run end to end
        only = to_int8(g, clipped, keep_float=[n for n in layers if n != name], fold_integer=False)
        want = 1 - min(cos(a["prob"], ob.interpret(only, f)["prob"]) for a, f in zip(acts, samples))
        # the search leaves the bias float (int32 at s_x*s_w in the model): a rounding apart
        assert want > 1e-4 and errors[name] == pytest.approx(want, rel=0.05)


def test_mixed_precision_auto_finds_the_fewest_layers(cnn):
    _, g, table = cnn
    # two layers' outputs clipped hard: both must stay float, and the search must stop there
    damaged = _damaged(table, "conv2b_out", "conv1_out")
    samples = feeds(3, seed=5)
    mixed = ob.quantize(g, damaged, mixed_precision="auto", target_cos=0.9999, samples=samples)
    kept = mixed.metadata["quant.auto_float_layers"].split(",")
    assert sorted(kept) == ["conv1", "conv2b"]
    from opbridge.quant.int8 import to_int8

    for drop in kept:  # with either one int8 again the target is missed
        q = to_int8(g, damaged, keep_float=[k for k in kept if k != drop])
        assert min(cos(ob.interpret(g, f)["prob"], ob.interpret(q, f)["prob"]) for f in samples) < 0.9999


def test_unsigned_activations_run_on_the_simulator_bit_for_bit(cnn):
    _, g, table = cnn
    q = ob.quantize(g, table)
    assert any(v.dtype == "u8" for n in q.nodes for v in n.outputs)  # the Relu branch is unsigned
    prog = ob.compile(q, target="bm1684")
    for f in feeds(2, seed=3):
        np.testing.assert_array_equal(prog.run(f)["prob"], ob.interpret(q, f)["prob"])


def test_search_scores_worst_feed_first_and_stops_under_target(cnn, monkeypatch):
    import importlib

    qmod = importlib.import_module("opbridge.quant.quantize")  # the package's name is the function
    _, g, table = cnn
    bad = dict(table.tensors)
    r = bad["conv2b_out"]
    bad["conv2b_out"] = TensorRange(r.min, r.max, r.threshold / 20)
    q = ob.quantize(g, CalibrationTable(table.graph, table.method, table.samples, bad))
    samples = feeds(5, seed=5)
    reference = [ob.interpret(g, f) for f in samples]
    per_feed = [cos(ref["prob"], ob.interpret(q, f)["prob"]) for ref, f in zip(reference, samples)]
    runs = []
    real = qmod.output_cosine
    monkeypatch.setattr(qmod, "output_cosine", lambda *a: runs.append(1) or real(*a))
    # a target it meets: every feed runs, and the answer is the lowest cosine
    assert qmod._WorstFirst(g, samples, reference, min(per_feed))(q) == pytest.approx(min(per_feed), abs=1e-9)
    assert len(runs) == 5
    # a target it misses: the second time, the feed that failed first runs first and alone
    score = qmod._WorstFirst(g, samples, reference, max(per_feed) + 1e-9)
    first = score(q)
    runs.clear()
    assert score(q) == pytest.approx(first, abs=1e-9) and first < max(per_feed) + 1e-9
    assert len(runs) == 1


def test_search_scores_the_logits_before_a_final_softmax_or_sigmoid():
    from opbridge.quant.quantize import scored_tensors

    nodes = [helper.make_node("Gemm", ["x", "w"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["p"]),
             helper.make_node("Identity", ["p"], ["prob"]),
             helper.make_node("Gemm", ["x", "w"], ["map"]),
             helper.make_node("Sigmoid", ["map"], ["s"]),
             helper.make_node("Reshape", ["s", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["heat"], perm=[1, 0]),
             helper.make_node("Gemm", ["x", "w"], ["raw"])]
    inits = [numpy_helper.from_array(np.ones((4, 6), np.float32), "w"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "shape")]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("prob", "heat", "raw")]
    model = helper.make_model(helper.make_graph(nodes, "heads", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4])], outs, inits), opset_imports=[helper.make_opsetid("", 14)])
    g = ob.convert(model, passes=())
    # every output as it is (cosine); the inputs of the Softmax and the Sigmoid with their length
    assert scored_tensors(g) == {"prob": False, "heat": False, "raw": False, "logits": True, "map": True}


def test_scaled_cosine_sees_logits_that_shrink():
    from opbridge.quant.quantize import cosine, scaled_cosine

    a = np.array([5.76, -6.18])
    assert cosine(a, 0.66 * a) == pytest.approx(1.0)
    # 1 - |a - b|^2 / (2 |a|^2) with b = 0.66 a: 1 - 0.34^2 / 2
    assert scaled_cosine(a, 0.66 * a) == pytest.approx(1 - 0.34 ** 2 / 2)
    b = np.array([1.0, 0.5])
    assert scaled_cosine(b / np.linalg.norm(b), np.array([0.6, 0.8])) == pytest.approx(
        cosine(b, np.array([0.6, 0.8])))  # as long as each other: the cosine


def test_sensitivity_runs_on_the_feeds_int8_does_worst_on(cnn):
    from opbridge.quant.quantize import _Baseline

    _, g, table = cnn
    q = ob.quantize(g, _damaged(table))
    samples = feeds(6, seed=7)
    per_feed = [cos(ob.interpret(g, f)["prob"], ob.interpret(q, f)["prob"]) for f in samples]
    base = _Baseline(g, q, samples, 2, {"prob": False})
    assert base.cosines == pytest.approx(per_feed, abs=1e-9)
    assert base.worst_feeds == list(np.argsort(per_feed)[:2])
    for i, acts in zip(base.worst_feeds, base.acts):  # their float activations, every tensor
        np.testing.assert_array_equal(acts["conv2b_out"], ob.interpret(g, samples[i], keep_intermediates=True)["conv2b_out"])


def test_search_never_returns_worse_than_int8_everywhere(cnn):
    """A builder whose every mixed candidate is worse than int8 everywhere (int8 everywhere
    with a worse table, whatever it is asked to keep float): the search gives int8
    everywhere back."""
    from opbridge.quant.int8 import to_int8
    from opbridge.quant.quantize import Int8Builder, auto_mixed

    _, g, table = cnn
    mild = _damaged(table)

    class Worse(Int8Builder):
        def __call__(self, keep_float):
            return to_int8(g, _damaged(mild, "conv1_out", "conv2a_out") if keep_float else mild)

    samples = feeds(3, seed=5)
    plain = min(cos(ob.interpret(g, f)["prob"], ob.interpret(to_int8(g, mild), f)["prob"]) for f in samples)
    q = auto_mixed(g, mild, samples, 0.99999, True, build=Worse(g, mild, True, None))
    assert q.metadata["quant.auto_float_layers"] == ""
    assert min(cos(ob.interpret(g, f)["prob"], ob.interpret(q, f)["prob"]) for f in samples) == pytest.approx(plain)


def test_search_on_the_worst_feeds_then_every_feed_finds_the_fewest(cnn):
    """The lazy search (candidates scored on the worst feeds, the answer on every feed) keeps
    float the same number of layers as scoring every candidate on every feed would."""
    from opbridge.quant.int8 import to_int8
    from opbridge.quant.quantize import layer_errors, scored_tensors

    _, g, table = cnn
    damaged = _damaged(table, "conv2b_out", "conv1_out", "conv2a_out")
    samples = feeds(8, seed=11)
    target = 0.99995
    mixed = ob.quantize(g, damaged, mixed_precision="auto", target_cos=target, samples=samples)
    kept = [k for k in mixed.metadata["quant.auto_float_layers"].split(",") if k]
    names = scored_tensors(g)
    worst = sorted(range(8), key=lambda i: cos(ob.interpret(g, samples[i])["prob"],
                                               ob.interpret(to_int8(g, damaged), samples[i])["prob"]))[:4]
    errors = layer_errors(g, damaged, [ob.interpret(g, samples[i], keep_intermediates=True) for i in worst],
                          True, names)
    order = sorted(errors, key=lambda n: -errors[n])

    def score(k):
        q = to_int8(g, damaged, keep_float=order[:k])
        out = []
        for f in samples:
            a, b = ob.interpret(g, f, keep_intermediates=True), ob.interpret(q, f, keep_intermediates=True)
            x, y = a["logits"].astype(np.float64), b["logits"].astype(np.float64)
            out += [cos(a["prob"], b["prob"]), 1 - np.sum((x - y) ** 2) / (2 * np.sum(x ** 2))]
        return min(out)

    fewest = next(k for k in range(len(order) + 1) if score(k) >= target)
    assert len(kept) == fewest and kept == order[:fewest]
    assert score(fewest) >= target


def test_search_reuses_the_float_outputs_calibration_kept(cnn, monkeypatch, tmp_path):
    import importlib

    qmod = importlib.import_module("opbridge.quant.quantize")
    _, g, _ = cnn
    samples = feeds(4, seed=13)
    table = ob.calibrate(g, samples, method="minmax")
    assert len(table.reference) == 4  # one entry per sample, the scored tensors
    first = next(iter(table.reference.values()))
    assert set(first) == {"prob", "logits"}
    float_runs = []
    real = qmod.interpret

    def counting(graph, feed, **kw):
        if not kw.get("keep_intermediates") and not any(n.op == "QuantizeLinear" for n in graph.nodes):
            float_runs.append(1)
        return real(graph, feed, **kw)

    monkeypatch.setattr(qmod, "interpret", counting)
    damaged = _damaged(table)
    damaged.reference = table.reference
    cached = ob.quantize(g, damaged, mixed_precision="auto", target_cos=0.9999, samples=samples)
    assert float_runs == []  # the reference came from calibration
    table.save(tmp_path / "t.json")  # a saved table keeps no reference: the search runs the float model
    loaded = _damaged(CalibrationTable.load(tmp_path / "t.json"))
    fresh = ob.quantize(g, loaded, mixed_precision="auto", target_cos=0.9999, samples=samples)
    assert len(float_runs) == 4
    assert fresh.metadata["quant.cosine"] == cached.metadata["quant.cosine"]
    assert fresh.metadata["quant.auto_float_layers"] == cached.metadata["quant.auto_float_layers"]
    # other samples than calibration's: no hit, the float model runs
    float_runs.clear()
    ob.quantize(g, damaged, mixed_precision="auto", target_cos=0.9999, samples=feeds(2, seed=14))
    assert len(float_runs) == 2
