"""Activation ops: the IR interpreter against onnx.reference.ReferenceEvaluator."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from opbridge.errors import AttrError, ShapeError

from .onnx_ref import assert_close, run_ir, run_onnx_reference

BF16 = np.dtype(ml_dtypes.bfloat16)
#: Values where activations have edges: infinities, nan, signed zero, large magnitudes.
EDGE = np.array([-np.inf, -30.0, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 30.0, np.inf, np.nan])


def data(kind: str, dtype: np.dtype, seed: int = 0) -> np.ndarray:
    """Test input: 'randn' (a 4-D normal sample, spread to cover the curves) or 'edge'."""
    if kind == "edge":
        return EDGE.astype(dtype)
    return (np.random.default_rng(seed).standard_normal((2, 3, 4, 5)) * 3).astype(dtype)


def tolerance(dtype: np.dtype) -> dict[str, float]:
    if dtype == np.float16:
        return {"rtol": 2e-3, "atol": 2e-3}
    if dtype == BF16:
        return {"rtol": 1.6e-2, "atol": 1.6e-2}
    if dtype == np.float64:
        # ONNX float attributes are f32, and the reference uses f32 constants (and an f32
        # erf) in some f64 kernels: f64 agrees to about f32 precision only.
        return {"rtol": 1e-6, "atol": 1e-7}
    return {"rtol": 1e-5, "atol": 1e-6}


def check(op: str, inputs: list[np.ndarray | None], ref_inputs: list[np.ndarray | None] | None = None,
          opset: int = 21, ir_attrs: dict | None = None, **attrs) -> None:
    """Compare run_ir with the ONNX reference on the same node (dtype and values)."""
    got = run_ir(op, inputs, **(ir_attrs if ir_attrs is not None else attrs))[0]
    with np.errstate(all="ignore"):  # the reference warns on inf/nan; that is expected here
        want = run_onnx_reference(op, ref_inputs if ref_inputs is not None else inputs,
                                  opset=opset, **attrs)[0]
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    close(got, want, **tolerance(inputs[0].dtype))


def close(got: np.ndarray, want: np.ndarray, **tol: float) -> None:
    """assert_close, with bf16 (which it does not treat as float) compared as f32."""
    if got.dtype == BF16:
        got, want = got.astype(np.float32), np.asarray(want).astype(np.float32)
    assert_close(got, want, **tol)


# (op, attrs, opset): every float activation without extra inputs; {} is "attribute absent".
UNARY = [
    ("Relu", {}, 21),
    ("LeakyRelu", {}, 21),
    ("LeakyRelu", {"alpha": 0.2}, 21),
    ("Sigmoid", {}, 21),
    ("HardSigmoid", {}, 21),
    ("HardSigmoid", {"alpha": 0.5, "beta": 0.25}, 21),
    ("HardSwish", {}, 21),
    ("Tanh", {}, 21),
    ("Elu", {}, 21),
    ("Elu", {"alpha": 0.3}, 21),
    ("Selu", {}, 21),
    ("Selu", {"alpha": 2.0, "gamma": 3.0}, 21),
    ("Celu", {}, 21),
    ("Celu", {"alpha": 2.5}, 21),
    ("Gelu", {}, 21),
    ("Gelu", {"approximate": "none"}, 21),
    ("Gelu", {"approximate": "tanh"}, 21),
    ("Mish", {}, 21),
    ("Softplus", {}, 21),
    ("Softsign", {}, 21),
    ("ThresholdedRelu", {}, 21),
    ("ThresholdedRelu", {"alpha": -0.5}, 21),
    ("Swish", {}, 24),
    ("Swish", {"alpha": 1.702}, 24),
    ("Shrink", {}, 21),
    ("Shrink", {"lambd": 1.5, "bias": 0.5}, 21),
]


def _attr_id(attrs: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in attrs.items()) or "attrs=absent"


# Reference shortcomings on edge values, with what ours does instead (checked separately below).
REF_EDGE_GAPS = {
    # ReferenceEvaluator computes log(exp(x) + 1), which overflows to inf at x=30 in f16.
    ("Softplus", "f16"): "reference overflows exp(30) in f16",
    ("Mish", "f16"): "reference overflows exp(30) in f16",
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, BF16], ids=["f32", "f16", "f64", "bf16"])
@pytest.mark.parametrize("kind", ["randn", "edge"])
@pytest.mark.parametrize("op, attrs, opset", [pytest.param(*c, id=f"{c[0]}-{_attr_id(c[1])}") for c in UNARY])
def test_unary_activation_matches_reference(op, attrs, opset, kind, dtype):
    dtype = np.dtype(dtype)
    name = {np.float32: "f32", np.float16: "f16", np.float64: "f64"}.get(dtype.type, "bf16")
    if kind == "edge" and (op, name) in REF_EDGE_GAPS:
        pytest.skip(REF_EDGE_GAPS[(op, name)])
    if op == "Shrink" and dtype == BF16:
        pytest.skip("ONNX Shrink does not accept bf16 (nor does the IR op)")
    check(op, [data(kind, dtype)], opset=opset, **attrs)


@pytest.mark.parametrize("op", ["Softplus", "Mish"])
def test_softplus_family_does_not_overflow(op):
    # log(1 + exp(30)) = 30 + log1p(exp(-30)), written here from the definition.
    x = np.array([30.0, 80.0], np.float16)
    y = run_ir(op, [x])[0]
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float64), [30.0, 80.0], rtol=1e-3)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64], ids=["i8", "i32", "i64"])
def test_relu_integers(dtype):
    x = np.array([-128, -1, 0, 1, 127], dtype)
    check("Relu", [x])


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64], ids=["i32", "u8", "i64"])
def test_shrink_integers(dtype):
    x = np.arange(-5, 6).astype(dtype) if dtype != np.uint8 else np.arange(0, 11).astype(dtype)
    check("Shrink", [x], lambd=2.0, bias=1.0)


# -- PRelu ---------------------------------------------------------------------------------
@pytest.mark.parametrize("slope_shape", [(3, 1, 1), (1,), (5,), (4, 5), (2, 3, 4, 5), ()],
                         ids=lambda s: "slope=" + "x".join(map(str, s)) if s else "slope=scalar")
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_prelu_slope_broadcast(slope_shape, dtype):
    x = data("randn", np.dtype(dtype))
    slope = np.random.default_rng(1).uniform(0, 0.5, slope_shape).astype(dtype)
    check("PRelu", [x, slope])


@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=["i32", "i64"])
def test_prelu_integers(dtype):
    x = np.arange(-6, 6, dtype=dtype).reshape(3, 4)
    check("PRelu", [x, np.array([1, 2, 3, 4], dtype)])


def test_prelu_slope_that_does_not_broadcast_to_x_is_an_error():
    x = np.zeros((2, 3, 4, 5), np.float32)
    with pytest.raises(ShapeError, match=r"node 'node' \(PRelu\).*slope shape \[3\]"):
        run_ir("PRelu", [x, np.ones(3, np.float32)])
    with pytest.raises(ShapeError, match=r"node 'node' \(PRelu\)"):
        run_ir("PRelu", [x, np.ones((7, 2, 3, 4, 5), np.float32)])  # would grow x


# -- Clip: IR attributes vs ONNX >= 11 inputs ----------------------------------------------
CLIP = [
    ("min=absent,max=absent", None, None),
    ("min=-1", -1.0, None),
    ("max=1.5", None, 1.5),
    ("min=-1,max=1.5", -1.0, 1.5),
    ("min>max", 2.0, -2.0),
]


@pytest.mark.parametrize("kind", ["randn", "edge"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("case_id, lo, hi", [pytest.param(*c, id=c[0]) for c in CLIP])
def test_clip_matches_reference(case_id, lo, hi, dtype, kind):
    x = data(kind, np.dtype(dtype))
    ref_inputs = [x, None if lo is None else np.array(lo, dtype), None if hi is None else np.array(hi, dtype)]
    attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
    check("Clip", [x], ref_inputs=ref_inputs, ir_attrs=attrs)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64], ids=["i8", "u8", "i32", "i64"])
@pytest.mark.parametrize("lo, hi", [(3, 100), (None, 5), (2, None), (4, 2)], ids=["both", "max", "min", "min>max"])
def test_clip_integers_matches_reference(dtype, lo, hi):
    x = np.random.default_rng(2).integers(0 if dtype == np.uint8 else -50, 120, (4, 6)).astype(dtype)
    ref_inputs = [x, None if lo is None else np.array(lo, dtype), None if hi is None else np.array(hi, dtype)]
    attrs = {k: float(v) for k, v in (("min", lo), ("max", hi)) if v is not None}
    check("Clip", [x], ref_inputs=ref_inputs, ir_attrs=attrs)


def test_clip_integer_input_with_fractional_or_huge_float_bounds():
    # Float bounds on an integer tensor round inward and saturate to the dtype's range:
    # clip(x, 1.5, 4.5) keeps the integers in [2, 4]; +-1e30 leave int8 untouched.
    x = np.arange(-3, 8, dtype=np.int32)
    np.testing.assert_array_equal(run_ir("Clip", [x], min=1.5, max=4.5)[0], np.array(
        [2, 2, 2, 2, 2, 2, 3, 4, 4, 4, 4], np.int32))
    x8 = np.array([-128, 0, 127], np.int8)
    np.testing.assert_array_equal(run_ir("Clip", [x8], min=-1e30, max=1e30)[0], x8)
    np.testing.assert_array_equal(run_ir("Clip", [x8], min=1e30)[0], np.full(3, 127, np.int8))


def test_clip_default_bounds_are_infinite():
    from opbridge.ir.opdef import get_op
    params = get_op("Clip").params
    assert params["min"].default == -math.inf and params["max"].default == math.inf


# -- errors --------------------------------------------------------------------------------
X = np.zeros((2, 3), np.float32)

ERRORS = [
    ("LeakyRelu", {"alpha": "big"}, AttrError, r"node 'node' \(LeakyRelu\) param 'alpha'"),
    ("Gelu", {"approximate": "fast"}, AttrError, r"node 'node' \(Gelu\) param 'approximate'.*one of"),
    ("Celu", {"alpha": 0.0}, AttrError, r"node 'node' \(Celu\) param 'alpha'.*must not be 0"),
    ("Elu", {"beta": 1.0}, AttrError, r"node 'node' \(Elu\) param 'beta': not a parameter"),
    ("Clip", {"min": [0.0, 1.0]}, AttrError, r"node 'node' \(Clip\) param 'min'"),
    ("HardSigmoid", {"alpha": True}, AttrError, r"node 'node' \(HardSigmoid\) param 'alpha'"),
]


@pytest.mark.parametrize("op, attrs, err, match", [pytest.param(*e, id=f"{e[0]}-{_attr_id(e[1])}") for e in ERRORS])
def test_bad_attribute_names_node_and_param(op, attrs, err, match):
    with pytest.raises(err, match=match):
        run_ir(op, [X], **attrs)


@pytest.mark.parametrize("op", ["Sigmoid", "LeakyRelu", "Gelu", "Softplus"])
def test_integer_input_to_float_only_activation_is_rejected(op):
    with pytest.raises(ShapeError, match=rf"node 'node' \({op}\): input 0 .* has dtype i32"):
        run_ir(op, [np.zeros((2, 3), np.int32)])
