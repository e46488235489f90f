"""ONNX activation mappings: a converted one-node model against onnxruntime (opset >= 7) or
against numpy written from the ONNX spec (legacy opsets onnxruntime no longer runs)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import opbridge as ob
from opbridge.errors import AttrError, OpbridgeError
from tests.conftest import requires_ort
from tests.ir.ops.onnx_ref import onnx_node_model

pytestmark = requires_ort

F32 = np.float32


def convert_node(op: str, inputs: list, *, opset: int, initializers: list[bool] | None = None,
                 **attrs) -> tuple[ob.Graph, onnx.ModelProto, dict]:
    """A one-node ONNX model (typed by ONNX shape inference) and its converted IR graph."""
    model, feeds = onnx_node_model(op, inputs, opset=opset, initializers=initializers, **attrs)
    model = onnx.shape_inference.infer_shapes(model)
    model.ir_version = min(model.ir_version, 10)  # the newest IR version onnxruntime reads here
    return ob.convert(model), model, feeds


def run_ort(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def check_ort(op: str, inputs: list, *, opset: int, initializers: list[bool] | None = None,
              rtol: float = 1e-5, atol: float = 1e-6, **attrs) -> ob.Graph:
    """Convert the one-node model, interpret it, compare with onnxruntime (dtype and values)."""
    g, model, feeds = convert_node(op, inputs, opset=opset, initializers=initializers, **attrs)
    got = ob.interpret(g, feeds)["out0"]
    want = run_ort(model, feeds)
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)
    return g


def run_converted(op: str, inputs: list, *, opset: int, initializers: list[bool] | None = None,
                  **attrs) -> np.ndarray:
    g, _, feeds = convert_node(op, inputs, opset=opset, initializers=initializers, **attrs)
    return ob.interpret(g, feeds)["out0"]


def randn(*shape: int, seed: int = 0, scale: float = 3.0, dtype=F32) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


# (op, opset, attrs): {} is "attributes absent"
UNARY = [
    ("Relu", 6, {}), ("Relu", 14, {}),
    ("LeakyRelu", 6, {}), ("LeakyRelu", 16, {}), ("LeakyRelu", 16, {"alpha": 0.2}),
    ("Sigmoid", 6, {}), ("Sigmoid", 13, {}),
    ("HardSigmoid", 6, {}), ("HardSigmoid", 22, {"alpha": 0.3, "beta": 0.4}),
    ("Tanh", 13, {}),
    ("Elu", 6, {}), ("Elu", 22, {"alpha": 0.5}),
    ("Selu", 6, {}), ("Selu", 22, {"alpha": 1.5, "gamma": 2.0}),
    ("Softplus", 1, {}), ("Softplus", 22, {}),
    ("Softsign", 22, {}),
    ("Shrink", 9, {}), ("Shrink", 9, {"lambd": 1.0, "bias": 0.3}),
    ("ThresholdedRelu", 10, {}), ("ThresholdedRelu", 22, {"alpha": 0.5}),
    ("Celu", 12, {}), ("Celu", 12, {"alpha": 2.0}),
    ("HardSwish", 14, {}), ("HardSwish", 22, {}),
    ("Mish", 18, {}), ("Mish", 22, {}),
    ("Gelu", 20, {}), ("Gelu", 20, {"approximate": "tanh"}),
    ("Swish", 24, {}), ("Swish", 24, {"alpha": 1.702}),
]


def _id(op: str, opset: int, attrs: dict) -> str:
    return f"{op}-{opset}-" + (",".join(f"{k}={v}" for k, v in attrs.items()) or "attrs=absent")


@pytest.mark.parametrize("op, opset, attrs", [pytest.param(*c, id=_id(*c)) for c in UNARY])
def test_activation_matches_onnxruntime(op, opset, attrs):
    g = check_ort(op, [randn(2, 3, 4, 5)], opset=opset, **attrs)
    assert [n.op for n in g.nodes] == [op]


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid"])
def test_activation_f16_matches_onnxruntime(op):
    check_ort(op, [randn(2, 3, 4, dtype=np.float16)], opset=14, rtol=2e-3, atol=2e-3)


def test_opset1_consumed_inputs_is_ignored():
    x = randn(2, 3)
    y = run_converted("Relu", [x], opset=1, consumed_inputs=[0])
    np.testing.assert_array_equal(y, np.maximum(x, 0))


# -- PRelu ---------------------------------------------------------------------------------
@pytest.mark.parametrize("slope_shape", [(3, 1, 1), (1,), (5,), ()],
                         ids=lambda s: "slope=" + ("x".join(map(str, s)) or "scalar"))
@pytest.mark.parametrize("opset", [9, 16])
def test_prelu_matches_onnxruntime(opset, slope_shape):
    slope = np.random.default_rng(1).uniform(0, 0.5, slope_shape).astype(F32)
    check_ort("PRelu", [randn(2, 3, 4, 5), slope], opset=opset, initializers=[False, True])


def test_prelu_before_opset7_applies_a_1d_slope_per_channel():
    # PRelu-6: a 1-D slope of C values is per channel (axis 1); numpy from that definition
    x, slope = randn(2, 3, 4, 5), np.array([0.1, 0.2, 0.3], F32)
    y = run_converted("PRelu", [x, slope], opset=6, initializers=[False, True])
    np.testing.assert_allclose(y, np.where(x < 0, x * slope[:, None, None], x), rtol=1e-6)


# -- Clip ----------------------------------------------------------------------------------
CLIP6 = [{}, {"min": -1.0}, {"max": 0.5}, {"min": -1.0, "max": 0.5}]


@pytest.mark.parametrize("attrs", CLIP6, ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()) or "attrs=absent")
def test_clip6_attributes_match_onnxruntime(attrs):
    x = np.concatenate([randn(10), np.array([np.inf, -np.inf, np.nan], F32)])
    check_ort("Clip", [x], opset=6, **attrs)


def test_clip6_default_bounds_are_flt_max():
    # Clip-6 declares min/max defaults of -+FLT_MAX: an infinite input becomes FLT_MAX
    y = run_converted("Clip", [np.array([np.inf, -np.inf], F32)], opset=6)
    assert np.isfinite(y).all() and y[0] == np.finfo(F32).max


def test_clip1_absent_bounds_do_not_clip():
    x = np.array([np.inf, -3.0e38, 5.0], F32)
    np.testing.assert_array_equal(run_converted("Clip", [x], opset=1), x)


def _bound(v, dtype=F32):
    return None if v is None else np.array(v, dtype)


CLIP11 = [(-1.0, 0.5), (-1.0, None), (None, 0.5), (None, None), (2.0, -2.0)]


@pytest.mark.parametrize("const", [True, False], ids=["bounds=initializers", "bounds=inputs"])
@pytest.mark.parametrize("lo, hi", CLIP11, ids=[f"min={a},max={b}" for a, b in CLIP11])
@pytest.mark.parametrize("opset", [11, 13])
def test_clip11_input_bounds_match_onnxruntime(opset, lo, hi, const):
    x = randn(3, 4)
    g = check_ort("Clip", [x, _bound(lo), _bound(hi)], opset=opset, initializers=[False, const, const])
    if const:
        assert [n.op for n in g.nodes] == ["Clip"]  # constant bounds become attributes


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8], ids=["i32", "i64", "u8"])
def test_clip13_integers_match_onnxruntime(dtype):
    x = np.random.default_rng(2).integers(0, 100, (3, 4)).astype(dtype)
    check_ort("Clip", [x, _bound(10, dtype), _bound(60, dtype)], opset=13, initializers=[False, True, True])


def test_clip13_int64_bound_beyond_float_precision_stays_exact():
    big = 2**60 + 1
    x = np.array([2**61, 5, -(2**61)], np.int64)
    g = check_ort("Clip", [x, _bound(-big, np.int64), _bound(big, np.int64)], opset=13,
                  initializers=[False, True, True])
    assert "Clip" not in [n.op for n in g.nodes]


def test_clip11_bound_with_several_values_is_an_error():
    with pytest.raises(OpbridgeError, match=r"\[onnx\] node .*\(Clip\): input 1 \(min\) must hold one value"):
        convert_node("Clip", [randn(3), np.array([0.0, 1.0], F32)], opset=13, initializers=[False, True])


# -- errors --------------------------------------------------------------------------------
def test_unknown_attribute_names_node_and_attribute():
    with pytest.raises(AttrError, match=r"\[onnx\] node .*\(LeakyRelu\) attribute 'beta': not an attribute"):
        convert_node("LeakyRelu", [randn(3)], opset=16, beta=0.5)


def test_bad_attribute_value_names_node():
    with pytest.raises(AttrError, match=r"\(Gelu\) param 'approximate'"):
        convert_node("Gelu", [randn(3)], opset=20, approximate="erf")


# -- onnxruntime contrib (com.microsoft) GELU variants ---------------------------------------
MS = [
    ("Gelu", 1, {}), ("BiasGelu", 2, {}), ("FastGelu", 1, {}), ("FastGelu", 2, {}),
    ("QuickGelu", 1, {}), ("QuickGelu", 1, {"alpha": 1.5}),
]


@pytest.mark.parametrize("op, n_in, attrs", [
    pytest.param(op, n, a, id=f"{op}-inputs={n}-" + (",".join(f"{k}={v}" for k, v in a.items()) or "attrs=absent"))
    for op, n, a in MS])
def test_com_microsoft_gelu_variants_match_onnxruntime(op, n_in, attrs):
    from onnx import helper

    x, bias = randn(2, 3, 8), randn(8, seed=1)
    inputs = [x, bias][:n_in]
    names = [f"in{i}" for i in range(n_in)]
    node = helper.make_node(op, names, ["out0"], domain="com.microsoft", **attrs)
    graph = helper.make_graph(
        [node], "ms", [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, a.shape)
                       for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info("out0", onnx.TensorProto.FLOAT, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    feeds = dict(zip(names, inputs))
    got = ob.interpret(ob.convert(model), feeds)["out0"]
    np.testing.assert_allclose(got, run_ort(model, feeds), rtol=1e-5, atol=1e-5)
