"""ONNX elementwise mappings: a converted one-node model against onnxruntime (opset >= 7) or
against numpy written from the ONNX spec (legacy opsets onnxruntime no longer runs)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from opbridge.errors import AttrError, UnsupportedOpError
from tests.conftest import requires_ort

from .test_activation import check_ort, convert_node, randn, run_converted

pytestmark = requires_ort

F32 = np.float32
# (op, opset, low, high): inputs inside the function's domain
UNARY = [
    ("Abs", 13, -4, 4), ("Neg", 13, -4, 4), ("Exp", 13, -4, 4), ("Log", 13, 0.01, 10),
    ("Sqrt", 13, 0, 10), ("Reciprocal", 13, 0.5, 4), ("Floor", 13, -4, 4), ("Ceil", 13, -4, 4),
    ("Round", 22, -4, 4), ("Sign", 13, -4, 4), ("Erf", 13, -3, 3), ("Sin", 22, -4, 4),
    ("Cos", 22, -4, 4), ("Tan", 22, -1.5, 1.5), ("Asin", 22, -1, 1), ("Acos", 22, -1, 1),
    ("Atan", 22, -4, 4), ("Sinh", 22, -4, 4), ("Cosh", 22, -4, 4), ("Asinh", 22, -4, 4),
    ("Acosh", 22, 1, 5), ("Atanh", 22, -0.99, 0.99), ("Exp", 6, -4, 4), ("Sqrt", 6, 0, 4),
]


def uniform(lo, hi, shape, dtype=F32, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


def ints(lo, hi, shape, dtype, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


@pytest.mark.parametrize("op, opset, lo, hi", [pytest.param(*u, id=f"{u[0]}-{u[1]}") for u in UNARY])
def test_unary_matches_onnxruntime(op, opset, lo, hi):
    g = check_ort(op, [uniform(lo, hi, (2, 3, 4))], opset=opset)
    assert [n.op for n in g.nodes] == [op]


@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign"])
def test_unary_integers_match_onnxruntime(op):
    check_ort(op, [ints(-50, 50, (3, 4), np.int32)], opset=13)


def test_round_halves_to_even_like_onnxruntime():
    check_ort("Round", [np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], F32)], opset=11)


# -- binary --------------------------------------------------------------------------------
SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3))]
SHAPE_IDS = ["same", "trailing", "both-grow", "scalar-a"]


@pytest.mark.parametrize("dtype", [F32, np.int32, np.int64], ids=["f32", "i32", "i64"])
@pytest.mark.parametrize("sa, sb", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("opset", [7, 14])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_matches_onnxruntime(op, opset, sa, sb, dtype):
    a = ints(-100, 100, sa, dtype, seed=1)
    b = ints(1, 20, sb, dtype, seed=2) * np.where(ints(0, 2, sb, np.int8, seed=3) > 0, 1, -1).astype(dtype)
    check_ort(op, [a, b], opset=opset)


@pytest.mark.parametrize("op, fn", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                                    ("Div", np.divide), ("Pow", np.power)])
def test_legacy_broadcast_aligns_b_at_axis(op, fn):
    # opset < 7, broadcast=1, axis=1: B of shape (3,) lines up with A's dim 1 (spec example)
    a, b = np.abs(randn(2, 3, 4)) + 0.5, np.array([1.0, 2.0, 0.5], F32)
    y = run_converted(op, [a, b], opset=6, broadcast=1, axis=1)
    np.testing.assert_allclose(y, fn(a, b[None, :, None]), rtol=1e-6)


def test_legacy_broadcast_without_axis_is_trailing():
    a, b = randn(2, 3, 4), randn(4, seed=1)
    np.testing.assert_allclose(run_converted("Add", [a, b], opset=6, broadcast=1), a + b, rtol=1e-6)


def test_legacy_broadcast_axis_that_does_not_fit_is_an_error():
    with pytest.raises(AttrError, match=r"\(Add\) attribute 'axis'"):
        convert_node("Add", [randn(2, 3), randn(3, 4)], opset=6, broadcast=1, axis=1)


POW = [
    (F32, F32, 15, (0.1, 3), (-2, 2)), (F32, np.int64, 15, (-3, 3), (0, 4)),
    (np.int64, np.int64, 15, (-5, 5), (0, 6)), (F32, F32, 7, (0.1, 3), (-2, 2)),
    (np.int32, F32, 15, (0, 9), (0, 3)),
]


@pytest.mark.parametrize("xd, yd, opset, xr, yr", POW,
                         ids=[f"{np.dtype(a).name}^{np.dtype(b).name}-{o}" for a, b, o, _, _ in POW])
def test_pow_matches_onnxruntime(xd, yd, opset, xr, yr):
    x = uniform(*xr, (3, 4), seed=3).astype(xd) if np.dtype(xd).kind == "f" else ints(*xr, (3, 4), xd, seed=3)
    y = uniform(*yr, (4,), seed=4).astype(yd) if np.dtype(yd).kind == "f" else ints(*yr, (4,), yd, seed=4)
    if np.dtype(yd).kind == "f" and np.dtype(xd).kind == "i":
        y = np.round(y).astype(yd)  # integral float exponents: exact in every implementation
    check_ort("Pow", [x, y], opset=opset)


@pytest.mark.parametrize("dtype, fmod", [(np.int32, 0), (np.int32, 1), (np.int64, 0), (F32, 1)],
                         ids=["i32-fmod=0", "i32-fmod=1", "i64-fmod=0", "f32-fmod=1"])
def test_mod_matches_onnxruntime(dtype, fmod):
    # (float fmod=0 is checked against the ONNX reference in tests/ir/ops: onnxruntime rejects it)
    a = ints(-20, 20, (3, 4), dtype, seed=5)
    b = ints(1, 6, (4,), dtype, seed=6) * np.array([1, -1, 1, -1], dtype)
    check_ort("Mod", [a, b], opset=13, fmod=fmod)


def test_mod_fmod_absent_matches_onnxruntime():
    check_ort("Mod", [ints(-20, 20, (6,), np.int32), np.array([3, -3, 4, -4, 5, 7], np.int32)], opset=13)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64], ids=["u8", "u32", "u64"])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_matches_onnxruntime(direction, dtype):
    check_ort("BitShift", [ints(0, 200, (3, 4), dtype, seed=7), ints(0, 5, (4,), dtype, seed=8)],
              opset=11, direction=direction)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_bitwise_matches_onnxruntime(op):
    check_ort(op, [ints(-1000, 1000, (3, 4), np.int32, 9), ints(-1000, 1000, (4,), np.int32, 10)], opset=18)


def test_bitwise_not_matches_onnxruntime():
    check_ort("BitwiseNot", [ints(0, 255, (3, 4), np.uint8)], opset=18)


# -- variadic ------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [8, 13])
@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic_matches_onnxruntime(op, opset):
    check_ort(op, [randn(2, 3, 4, seed=1), randn(4, seed=2), randn(3, 1, seed=3)], opset=opset)


@pytest.mark.parametrize("op", ["Sum", "Max"])
def test_variadic_single_input_and_opset6(op):
    check_ort(op, [randn(2, 3)], opset=13)
    check_ort(op, [randn(2, 3), randn(2, 3, seed=1)], opset=6)


# -- Cast ----------------------------------------------------------------------------------
# (bf16 results are checked against the ONNX reference in tests/ir/ops: onnxruntime's Python
# binding cannot return bfloat16 arrays)
CASTS = [
    (np.array([-2.7, -0.5, 0.0, 1.5, 2.5, 100.9], F32), TensorProto.INT32),
    (np.array([-2.7, 0.0, 1.5, np.nan], F32), TensorProto.BOOL),
    (np.array([1e5, -1e5, 0.1, 3.0], F32), TensorProto.FLOAT16),
    (np.array([-129, 200, 70000], np.int64), TensorProto.INT8),
    (np.array([-1, 2**40 + 1], np.int64), TensorProto.FLOAT),
    (np.array([True, False]), TensorProto.DOUBLE),
    (np.array([0.5, -7.25], np.float16), TensorProto.INT64),
]


@pytest.mark.parametrize("opset", [6, 13, 21])
@pytest.mark.parametrize("x, to", CASTS, ids=[f"{c[0].dtype}->{TensorProto.DataType.Name(c[1])}" for c in CASTS])
def test_cast_matches_onnxruntime(opset, x, to):
    check_ort("Cast", [x], opset=opset, to=to)


def test_cast1_takes_the_type_name():
    y = run_converted("Cast", [np.array([1.7, -1.7], F32)], opset=1, to="INT32")
    assert y.dtype == np.int32 and y.tolist() == [1, -1]


def test_cast_to_a_type_the_ir_lacks_is_unsupported():
    with pytest.raises(UnsupportedOpError, match=r"\(Cast\): casting to TensorProto type 27"):
        convert_node("Cast", [randn(3)], opset=25, to=TensorProto.FLOAT6E2M3)


def test_castlike_matches_onnxruntime():
    check_ort("CastLike", [randn(3, 4), np.zeros(1, np.int64)], opset=15)


def test_extra_input_is_an_error_naming_the_node():
    from opbridge.errors import OpbridgeError

    with pytest.raises(OpbridgeError, match=r"\[onnx\] node .*\(Exp\): takes 1 input\(s\), the node has 2"):
        convert_node("Exp", [randn(3), randn(3)], opset=13)


def test_unknown_attribute_is_an_error_naming_it():
    with pytest.raises(AttrError, match=r"\(Add\) attribute 'broadcast': not an attribute of Add \(opset 14\)"):
        convert_node("Add", [randn(3), randn(3)], opset=14, broadcast=1)


def test_declared_attribute_the_mapping_does_not_implement_is_unsupported_not_unknown():
    from opbridge.mappers.onnx.elementwise import known_attrs
    from opbridge.parsers.origin import OriginNode

    # Gemm-13 declares alpha (onnx.defs); a mapping that implements only the default must say
    # "not supported", never "not an attribute".
    node = OriginNode("g", "Gemm", ["a", "b"], ["y"], attrs={"alpha": 2.0})
    with pytest.raises(UnsupportedOpError, match=r"\(Gemm\) attribute 'alpha': value 2.0 is "
                                                 r"not supported yet") as e:
        known_attrs(node, 13, ())
    assert e.value.attribute == "alpha" and e.value.node == "g"
    assert known_attrs(OriginNode("g", "Gemm", attrs={"alpha": 1.0}), 13, ()) == {}
