"""Bias correction (opbridge.quant.correct) against the method written out here in numpy with
onnx.reference running the convolutions, on a small built graph: Conv -> Relu -> Conv (the
second without a bias)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.quant import CalibrationTable, QuantError, TensorRange
from opbridge.quant.correct import bias_corrections


def _model() -> onnx.ModelProto:
    rng = np.random.default_rng(7)
    wa = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.4
    ba = rng.standard_normal(4).astype(np.float32) * 0.1
    wb = rng.standard_normal((5, 4, 1, 1)).astype(np.float32) * 0.5
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["a"], name="convA", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "wb"], ["y"], name="convB")]
    graph = helper.make_graph(
        nodes, "bc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 8, 8])],
        [numpy_helper.from_array(wa, "wa"), numpy_helper.from_array(ba, "ba"), numpy_helper.from_array(wb, "wb")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _feeds(n: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32) + 0.3} for _ in range(n)]


@pytest.fixture(scope="module")
def built():
    model = _model()
    g = ob.convert(model)
    cal = _feeds(6, seed=1)
    table = ob.calibrate(g, cal, method="minmax")
    # thresholds at half the range (the output's kept whole): clipping makes the int8 error's
    # mean far from zero
    half = CalibrationTable(table.graph, table.method, table.samples,
                            {k: TensorRange(v.min, v.max, v.threshold / (1 if k == "y" else 2))
                             for k, v in table.tensors.items()})
    return model, g, half, cal


def _fq(x: np.ndarray, thr: float, unsigned: bool) -> np.ndarray:
    scale = thr / (255.0 if unsigned else 127.0)
    lo, hi = (0, 255) if unsigned else (-128, 127)
    return (np.clip(np.rint(x / scale), lo, hi) * scale).astype(np.float32)


def _wq(w: np.ndarray) -> np.ndarray:
    s = np.abs(w).max(axis=(1, 2, 3), keepdims=True) / 127.0
    return (np.clip(np.rint(w / s), -127, 127) * s).astype(np.float32)


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> np.ndarray:
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[pad] * 4)
    g = helper.make_graph([node], "c", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                                        for n in ("x", "w", "b")],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    ref = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    return ref.run(None, {"x": x, "w": w, "b": b.astype(np.float32)})[0]


def test_corrections_equal_the_method_written_out(built):
    model, g, table, cal = built
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    wa, ba, wb = init["wa"], init["ba"], init["wb"]
    xs = [_fq(f["x"], table["x"].threshold, False) for f in cal]
    float_a = [_conv(f["x"], wa, ba, 1) for f in cal]
    got_a = [_conv(x, _wq(wa), ba, 1) for x in xs]
    shift_a = np.mean([fa - qa for fa, qa in zip(float_a, got_a)], axis=(0, 1, 3, 4))
    # the Relu is fused: Conv A's output is quantized unsigned at the Relu output's threshold
    rs = [_fq(np.maximum(qa + shift_a[None, :, None, None], 0), table["r"].threshold, True) for qa in got_a]
    float_y = [_conv(np.maximum(fa, 0), wb, np.zeros(5), 0) for fa in float_a]
    got_y = [_conv(r, _wq(wb), np.zeros(5), 0) for r in rs]
    shift_b = np.mean([fy - qy for fy, qy in zip(float_y, got_y)], axis=(0, 1, 3, 4))
    assert np.abs(shift_a).max() > 0.01 and np.abs(shift_b).max() > 0.01  # there is a bias to correct
    out = bias_corrections(g, table, cal)
    assert set(out) == {"convA", "convB"}
    np.testing.assert_allclose(out["convA"], ba + shift_a, atol=1e-5)
    np.testing.assert_allclose(out["convB"], shift_b, atol=1e-5)


def _mean_error(g, q, feeds) -> np.ndarray:
    """Per channel of y, the float output minus the int8 one, averaged over feeds and pixels."""
    return np.mean([ob.interpret(g, f)["y"] - ob.interpret(q, f)["y"] for f in feeds], axis=(0, 1, 3, 4))


def test_corrected_model_has_no_mean_error_on_its_calibration_data(built):
    _, g, table, cal = built
    plain = ob.quantize(g, table)
    corrected = ob.quantize(g, table, samples=cal, bias_correction=True)
    before, after = np.abs(_mean_error(g, plain, cal)), np.abs(_mean_error(g, corrected, cal))
    # what is left: the int32 bias's and the output's rounding (a fraction of one output step)
    step = table["y"].threshold / 127
    assert before.max() > step and after.max() < step / 4, (before, after, step)
    assert corrected.metadata["quant.bias_correction"] == "2 layers"
    # and on samples it never saw, the mean error still shrinks (the error is systematic)
    held = _feeds(6, seed=9)
    assert np.abs(_mean_error(g, corrected, held)).max() < 0.5 * np.abs(_mean_error(g, plain, held)).max()


def test_bias_correction_needs_samples(built):
    _, g, table, _ = built
    with pytest.raises(QuantError, match="bias correction needs calibration samples"):
        ob.quantize(g, table, bias_correction=True)
