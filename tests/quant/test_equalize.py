"""Cross-layer equalisation (opbridge.quant.equalize): the equalised float graph against
onnxruntime running the original model, its weights against Nagel et al.'s rescaling written
here in numpy, and int8 on a net with badly scaled channels."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.cli import main
from opbridge.quant import QuantError
from opbridge.quant.equalize import equalizable_pairs, equalize
from tests.conftest import requires_ort
from tests.quant.helpers import cos

#: Output-channel scales of the first convolution: four decades apart, as after folding a
#: BatchNorm whose channels' variances differ that much.
SKEW = np.array([30.0, 1.0, 0.02, 5.0, 0.1, 1.0], np.float32)


def _conv(name: str, x: str, w: np.ndarray, b: np.ndarray | None, out: str, **attrs) -> tuple:
    inits = [numpy_helper.from_array(w, f"{name}.w")]
    ins = [x, f"{name}.w"]
    if b is not None:
        inits.append(numpy_helper.from_array(b, f"{name}.b"))
        ins.append(f"{name}.b")
    return helper.make_node("Conv", ins, [out], name=name, **attrs), inits


def skewed_model(act2: str = "LeakyRelu") -> onnx.ModelProto:
    """x -> conv1 (1x1, channels scaled by SKEW) -> Relu -> dw (3x3 depthwise, channels
    scaled by 1/SKEW) -> ``act2`` -> pw (1x1) -> out: the float function is well scaled, its
    int8 per-tensor activation between conv1 and dw is not."""
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((6, 4, 1, 1)) * SKEW.reshape(-1, 1, 1, 1)).astype(np.float32)
    b1 = (rng.standard_normal(6) * SKEW * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((6, 1, 3, 3)) / SKEW.reshape(-1, 1, 1, 1)).astype(np.float32)
    b2 = rng.standard_normal(6).astype(np.float32) * 0.1
    w3 = rng.standard_normal((5, 6, 1, 1)).astype(np.float32)
    nodes, inits = [], []
    for node, i in (_conv("conv1", "x", w1, b1, "c1"), _conv("dw", "r1", w2, b2, "c2", group=6, pads=[1, 1, 1, 1]),
                    _conv("pw", "a2", w3, None, "out")):
        nodes.append(node)
        inits += i
    nodes.insert(1, helper.make_node("Relu", ["c1"], ["r1"], name="relu1"))
    extra = {"alpha": 0.1} if act2 == "LeakyRelu" else {}
    nodes.insert(3, helper.make_node(act2, ["c2"], ["a2"], name="act2", **extra))
    graph = helper.make_graph(nodes, "skewed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 12, 12])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 5, 12, 12])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _feeds(n: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, 4, 12, 12)).astype(np.float32)} for _ in range(n)]


def _weights(g: ob.Graph, node: str) -> np.ndarray:
    n = next(n for n in g.nodes if n.name == node)
    return n.inputs[1].data


@requires_ort
@pytest.mark.parametrize("act2", ["LeakyRelu", "Relu"])
def test_equalized_graph_computes_what_onnxruntime_computes_on_the_original(act2):
    import onnxruntime as ort

    model = skewed_model(act2)
    g = ob.convert(model)
    e = equalize(g)
    assert len(equalizable_pairs(g)) == 2 and e.metadata["quant.equalized"] == "2 pairs"
    assert not np.array_equal(_weights(e, "conv1"), _weights(g, "conv1"))  # it did rescale
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for f in _feeds(3, seed=1):
        ref = sess.run(None, f)[0]
        np.testing.assert_allclose(ob.interpret(e, f)["out"], ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    # the original graph is left as it was
    np.testing.assert_array_equal(_weights(g, "conv1"), numpy_helper.to_array(model.graph.initializer[0]))


def _nagel(w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, sweeps: int = 200) -> tuple[np.ndarray, ...]:
    """Nagel et al.'s equalisation of one Conv -> Conv pair (section 4.1), written out: for
    every channel i, r1 = max |w1[i]|, r2 = max |w2[:, i]|, s = sqrt(r1 / r2); w1[i] /= s,
    b1[i] /= s, w2[:, i] *= s; repeated until nothing moves."""
    w1, b1, w2 = (a.astype(np.float64).copy() for a in (w1, b1, w2))
    for _ in range(sweeps):
        for i in range(w1.shape[0]):
            s = np.sqrt(np.abs(w1[i]).max() / np.abs(w2[:, i]).max())
            w1[i] /= s
            b1[i] /= s
            w2[:, i] *= s
    return w1, b1, w2


def test_pair_weights_match_nagel_written_in_numpy():
    rng = np.random.default_rng(4)
    w1 = (rng.standard_normal((5, 3, 3, 3)) * np.array([50, 1, 0.01, 3, 0.3]).reshape(-1, 1, 1, 1)).astype(np.float32)
    b1 = rng.standard_normal(5).astype(np.float32)
    w2 = rng.standard_normal((4, 5, 1, 1)).astype(np.float32)
    c1, i1 = _conv("a", "x", w1, b1, "y")
    c2, i2 = _conv("b", "y", w2, None, "out")
    graph = helper.make_graph([c1, c2], "pair", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 6, 6])], i1 + i2)
    g = ob.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]))
    e = equalize(g)
    want_w1, want_b1, want_w2 = _nagel(w1, b1, w2)
    a = next(n for n in e.nodes if n.name == "a")
    np.testing.assert_allclose(a.inputs[1].data, want_w1, rtol=1e-5)
    np.testing.assert_allclose(a.inputs[2].data, want_b1, rtol=1e-5)
    np.testing.assert_allclose(_weights(e, "b"), want_w2, rtol=1e-5)
    # and the two ranges of every channel are equal, sqrt(r1 * r2) of the original
    r1 = np.abs(a.inputs[1].data).reshape(5, -1).max(axis=1)
    r2 = np.abs(_weights(e, "b")).max(axis=(0, 2, 3))
    np.testing.assert_allclose(r1, r2, rtol=1e-5)
    np.testing.assert_allclose(r1, np.sqrt(np.abs(w1).reshape(5, -1).max(axis=1) * np.abs(w2).max(axis=(0, 2, 3))),
                               rtol=1e-5)


@pytest.mark.parametrize("act", ["HardSwish", "Sigmoid"])
def test_no_pair_through_an_activation_that_is_not_homogeneous(act):
    g = ob.convert(skewed_model(act))
    e = equalize(g)
    # only conv1 -> Relu -> dw is a pair; dw -> act -> pw is not
    assert [(p.first.name, p.second.name) for p in equalizable_pairs(g)] == [("conv1", "dw")]
    np.testing.assert_array_equal(_weights(e, "pw"), _weights(g, "pw"))


def _int8_cos(model: onnx.ModelProto, equalize_: bool, per_channel: bool) -> float:
    g = ob.convert(model)
    table = ob.calibrate(g, _feeds(8, seed=2), method="minmax", equalize=equalize_)
    q = ob.quantize(g, table, per_channel=per_channel)
    assert (q.metadata.get("quant.equalized") == "2 pairs") == equalize_
    return min(cos(ob.interpret(g, f)["out"], ob.interpret(q, f)["out"]) for f in _feeds(4, seed=3))


@pytest.mark.parametrize("per_channel", [True, False])
def test_int8_error_drops_with_badly_scaled_channels(per_channel):
    model = skewed_model()
    plain, equalized = _int8_cos(model, False, per_channel), _int8_cos(model, True, per_channel)
    # the small channels of conv1's output are rounded away in one per-tensor int8 scale
    # until equalisation evens the channels out
    assert 1 - equalized < (1 - plain) / 3, (plain, equalized)
    assert equalized > 0.999


def test_table_records_equalisation_and_quantize_follows_it(tmp_path):
    g = ob.convert(skewed_model())
    table = ob.calibrate(g, _feeds(4, seed=2), equalize=True)
    table.save(tmp_path / "t.json")
    again = ob.quant.CalibrationTable.load(tmp_path / "t.json")
    assert again.equalized and again.tensors == table.tensors
    assert ob.quantize(g, tmp_path / "t.json").metadata["quant.equalized"] == "2 pairs"
    with pytest.raises(QuantError, match="made with cross-layer equalisation"):
        ob.quantize(g, table, equalize=False)
    plain = ob.calibrate(g, _feeds(4, seed=2))
    assert not plain.equalized and "equalized" not in plain.to_dict()
    with pytest.raises(QuantError, match="made without cross-layer equalisation"):
        ob.quantize(g, plain, equalize=True)


def test_cli_equalize(tmp_path, capsys):
    onnx.save(skewed_model(), tmp_path / "m.onnx")
    (tmp_path / "data").mkdir()
    for i, f in enumerate(_feeds(3, seed=2)):
        np.save(tmp_path / "data" / f"{i}.npy", f["x"])
    m, data = str(tmp_path / "m.onnx"), str(tmp_path / "data")
    assert main(["calibrate", m, "--data", data, "--equalize", "-o", str(tmp_path / "t.json")]) == 0
    assert "equalized" in capsys.readouterr().out
    assert main(["quantize", m, "--table", str(tmp_path / "t.json"), "-o", str(tmp_path / "q.obir")]) == 0
    assert "equalized (2 pairs)" in capsys.readouterr().out
    assert main(["calibrate", m, "--data", data, "-o", str(tmp_path / "p.json")]) == 0
    capsys.readouterr()
    assert main(["quantize", m, "--table", str(tmp_path / "p.json"), "--equalize", "-o",
                 str(tmp_path / "q2.obir")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err[0].startswith("error: ") and "without cross-layer equalisation" in err[0]
    assert err[1].startswith("hint: ")


@requires_ort
def test_grouped_second_conv():
    """Conv (8 channels, skewed) -> Relu -> Conv with group 2: input channel c of the second
    is column c % 4 of its output rows of group c // 4."""
    import onnxruntime as ort

    rng = np.random.default_rng(7)
    skew = np.array([40, 1, 0.03, 2, 0.5, 9, 0.01, 1], np.float32)
    w1 = (rng.standard_normal((8, 3, 3, 3)) * skew.reshape(-1, 1, 1, 1)).astype(np.float32)
    w2 = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    c1, i1 = _conv("a", "x", w1, rng.standard_normal(8).astype(np.float32), "y", pads=[1, 1, 1, 1])
    c2, i2 = _conv("b", "r", w2, None, "out", group=2)
    graph = helper.make_graph([c1, helper.make_node("Relu", ["y"], ["r"]), c2], "grouped",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 6, 8, 8])], i1 + i2)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    e = equalize(ob.convert(model))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    f = {"x": rng.standard_normal((1, 3, 10, 10)).astype(np.float32)}
    ref = sess.run(None, f)[0]
    np.testing.assert_allclose(ob.interpret(e, f)["out"], ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    r1 = np.abs(_weights(e, "a")).reshape(8, -1).max(axis=1)
    w2e = _weights(e, "b")
    r2 = np.array([np.abs(w2e[(c // 4) * 3:(c // 4 + 1) * 3, c % 4]).max() for c in range(8)])
    np.testing.assert_allclose(r1, r2, rtol=1e-5)
