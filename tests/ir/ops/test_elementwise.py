"""Elementwise math ops: the IR interpreter against onnx.reference.ReferenceEvaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from opbridge.errors import AttrError, ShapeError
from opbridge.ir.types import from_numpy_dtype, to_numpy_dtype

from .onnx_ref import run_ir, run_onnx_reference
from .test_activation import BF16, EDGE, check, close, tolerance

F32, F16, F64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)
FLOAT_DTYPES = [pytest.param(F32, id="f32"), pytest.param(F16, id="f16"), pytest.param(F64, id="f64"),
                pytest.param(BF16, id="bf16")]
#: Inputs inside each function's domain (outside it both sides give nan, checked by 'edge').
DOMAIN = {"Asin": (-1, 1), "Acos": (-1, 1), "Atanh": (-1, 1), "Acosh": (1, 5), "Log": (0.01, 10),
          "Sqrt": (0, 10), "Reciprocal": (0.5, 4), "Tan": (-1.5, 1.5)}
UNARY = ["Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Erf",
         "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
         "Identity"]


def rand(shape, dtype, lo=-4.0, hi=4.0, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, int(lo)), min(info.max, int(hi)) + 1, shape).astype(dtype)
    return rng.uniform(lo, hi, shape).astype(dtype)


@pytest.mark.parametrize("kind", ["randn", "edge"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", UNARY)
def test_unary_float_matches_reference(op, dtype, kind):
    if kind == "edge":
        x = EDGE.astype(dtype)
    else:
        x = rand((2, 3, 4, 5), dtype, *DOMAIN.get(op, (-4.0, 4.0)))
    check(op, [x])


def test_round_halves_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4999], np.float32)
    check("Round", [x])
    np.testing.assert_array_equal(run_ir("Round", [x])[0], [-2, -2, -0, 0, 2, 2, 4, 2])


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32],
                         ids=["i8", "i32", "i64", "u8", "u32"])
@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign", "Identity"])
def test_unary_integers_match_reference(op, dtype):
    if op == "Neg" and np.dtype(dtype).kind == "u":
        pytest.skip("ONNX Neg takes no unsigned types (nor does the IR op)")
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, -1 if info.min else 1, 0, 1, 7, info.max], dtype)
    check(op, [x])


def test_identity_takes_bool():
    check("Identity", [np.array([True, False])])


# -- binary arithmetic ---------------------------------------------------------------------
SHAPES = [
    pytest.param((2, 3, 4), (2, 3, 4), id="same"),
    pytest.param((2, 3, 4), (4,), id="trailing"),
    pytest.param((2, 1, 4), (3, 1), id="both-grow"),
    pytest.param((), (2, 3), id="scalar-a"),
    pytest.param((2, 3, 4, 5), (1, 3, 1, 1), id="rank4-channel"),
]
BIN_DTYPES = [pytest.param(np.dtype(d), id=from_numpy_dtype(d))
              for d in (np.float32, np.float16, np.float64, np.int32, np.int64, np.uint8, np.int8)]
BIN_DTYPES.append(pytest.param(BF16, id="bf16"))


@pytest.mark.parametrize("dtype", BIN_DTYPES)
@pytest.mark.parametrize("sa, sb", SHAPES)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_arithmetic_matches_reference(op, sa, sb, dtype):
    a = rand(sa, dtype, -100, 100, seed=1)
    b = rand(sb, dtype, -100, 100, seed=2)
    if op == "Div":
        b = np.where(b == 0, np.ones((), dtype), b)  # integer division by zero is undefined
    check(op, [a, b])


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64], ids=["i8", "i32", "i64"])
def test_integer_div_truncates_toward_zero(dtype):
    a = np.array([7, -7, 7, -7, 6, -6, 1, -1, 0], dtype)
    b = np.array([2, 2, -2, -2, 3, -3, 5, 5, 3], dtype)
    check("Div", [a, b])
    np.testing.assert_array_equal(run_ir("Div", [a, b])[0], [3, -3, -3, 3, 2, 2, 0, 0, 0])


def test_integer_overflow_wraps():
    a = np.array([120, -120], np.int8)
    check("Add", [a, np.array([10, -10], np.int8)])
    check("Mul", [a, np.array([2, 2], np.int8)])


def test_float_division_by_zero_gives_inf_and_nan():
    check("Div", [np.array([1.0, -1.0, 0.0], np.float32), np.zeros(3, np.float32)])


POW = [
    pytest.param(F32, F32, (-3, 3), (-2, 2), id="f32^f32"),
    pytest.param(F32, np.dtype(np.int64), (-3, 3), (0, 4), id="f32^i64"),
    pytest.param(F16, F32, (0.1, 3), (-2, 2), id="f16^f32"),
    pytest.param(F64, np.dtype(np.int32), (-3, 3), (-3, 3), id="f64^i32"),
    pytest.param(np.dtype(np.int32), np.dtype(np.int32), (-5, 5), (0, 5), id="i32^i32"),
    pytest.param(np.dtype(np.int64), np.dtype(np.int64), (-5, 5), (0, 20), id="i64^i64"),
    pytest.param(np.dtype(np.int64), F32, (0, 9), (0, 3), id="i64^f32"),
    pytest.param(BF16, BF16, (0.1, 3), (-2, 2), id="bf16^bf16"),
]


@pytest.mark.parametrize("xd, yd, xr, yr", POW)
def test_pow_mixed_dtypes_matches_reference(xd, yd, xr, yr):
    x = rand((3, 4), xd, *xr, seed=3)
    y = rand((4,), yd, *yr, seed=4)
    if yd.kind == "f" and xd.kind == "i":
        y = np.round(y * 2) / 2  # exact halves: x ** 0.5 etc. truncate the same way everywhere
    check("Pow", [x, y])


def test_pow_negative_base_fractional_exponent_is_nan():
    check("Pow", [np.array([-8.0, 8.0], np.float32), np.array([1 / 3, 1 / 3], np.float32)])


MOD = [
    pytest.param(np.dtype(np.int32), {}, id="i32-fmod=absent"),
    pytest.param(np.dtype(np.int32), {"fmod": 0}, id="i32-fmod=0"),
    pytest.param(np.dtype(np.int32), {"fmod": 1}, id="i32-fmod=1"),
    pytest.param(np.dtype(np.int64), {}, id="i64-fmod=absent"),
    pytest.param(np.dtype(np.uint8), {}, id="u8-fmod=absent"),
    pytest.param(np.dtype(np.int8), {"fmod": 1}, id="i8-fmod=1"),
    pytest.param(F32, {"fmod": 1}, id="f32-fmod=1"),
    pytest.param(F32, {}, id="f32-fmod=absent"),
    pytest.param(F16, {"fmod": 0}, id="f16-fmod=0"),
    pytest.param(F16, {"fmod": 1}, id="f16-fmod=1"),
    pytest.param(F64, {"fmod": 1}, id="f64-fmod=1"),
]


@pytest.mark.parametrize("dtype, attrs", MOD)
def test_mod_matches_reference(dtype, attrs):
    # the Mod spec defines fmod=0 for floats too: a - floor(a / b) * b, Python's %
    a = rand((3, 4), dtype, -20, 20, seed=5)
    b = rand((4,), dtype, -6, 6, seed=6)
    b = np.where(b == 0, np.ones((), dtype) * 3, b)
    check("Mod", [a, b], **attrs)


@pytest.mark.parametrize("fmod", [0, 1], ids=["fmod=0", "fmod=1"])
def test_mod_float_special_values(fmod):
    a = np.array([5.0, -5.0, 0.0, -0.0, np.inf, 3.0, 5.0, -5.0, np.nan, 2.0], np.float32)
    b = np.array([np.inf, np.inf, 2.0, -2.0, 2.0, 0.0, -np.inf, -np.inf, 1.0, np.nan], np.float32)
    check("Mod", [a, b], fmod=fmod)


# -- bitwise -------------------------------------------------------------------------------
INT_DTYPES = [pytest.param(np.dtype(d), id=from_numpy_dtype(d))
              for d in (np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int32, np.int64)]


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_matches_reference(direction, dtype):
    x = rand((3, 4), dtype, -100, 100, seed=7)
    y = rand((4,), dtype, 0, 5, seed=8)
    check("BitShift", [x, y], direction=direction)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_by_the_bit_width_or_more(direction, dtype):
    # ONNX: shifting by >= the width (or a negative amount) gives what the sign fill alone gives.
    bits = dtype.itemsize * 8
    x = np.array([5, 5, 1], dtype) if dtype.kind == "u" else np.array([5, -5, 1], dtype)
    y = np.array([bits, bits + 3, bits - 1], dtype)
    check("BitShift", [x, y], direction=direction)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_bitwise_binary_matches_reference(op, dtype):
    check(op, [rand((2, 3, 4), dtype, -1000, 1000, seed=9), rand((3, 1), dtype, -1000, 1000, seed=10)])


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_bitwise_not_matches_reference(dtype):
    check("BitwiseNot", [rand((2, 3, 4), dtype, -1000, 1000, seed=11)])


# -- variadic ------------------------------------------------------------------------------
VARIADIC_SHAPES = [
    pytest.param([(2, 3)], id="one-input"),
    pytest.param([(2, 3), (2, 3)], id="two-same"),
    pytest.param([(2, 3, 4), (4,), (3, 1)], id="three-broadcast"),
    pytest.param([(1,), (2, 1), (1, 3), ()], id="four-grow"),
]


@pytest.mark.parametrize("dtype", [pytest.param(F32, id="f32"), pytest.param(F16, id="f16"),
                                   pytest.param(BF16, id="bf16"),
                                   pytest.param(np.dtype(np.int32), id="i32"),
                                   pytest.param(np.dtype(np.uint8), id="u8")])
@pytest.mark.parametrize("shapes", VARIADIC_SHAPES)
@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic_matches_reference(op, shapes, dtype):
    if dtype.kind in "iu" and op in ("Sum", "Mean"):
        pytest.skip(f"ONNX {op} takes float types only (as does the IR op)")
    # f16 inputs stay small: the reference accumulates in f16, the IR in f32
    lo, hi = (0, 50) if dtype.kind == "u" else ((-4, 4) if dtype == F16 else (-50, 50))
    xs = [rand(s, dtype, lo, hi, seed=20 + i) for i, s in enumerate(shapes)]
    if op == "Mean" and len({len(s) for s in shapes}) > 1:
        # ReferenceEvaluator's Mean adds in place and fails when the result outgrows input 0;
        # its Sum divided by the count is the same definition.
        want = (run_onnx_reference("Sum", xs)[0].astype(np.float64) / len(xs)).astype(dtype)
        close(run_ir("Mean", xs)[0], want, **tolerance(dtype))
        return
    check(op, xs)


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
def test_variadic_nan_propagates(op):
    a = np.array([np.nan, 1.0, -np.inf], np.float32)
    b = np.array([0.0, np.nan, 2.0], np.float32)
    check(op, [a, b])


# -- casts ---------------------------------------------------------------------------------
CAST_SRC = {
    "f32": np.array([-2.7, -0.5, -0.0, 0.0, 0.4, 1.5, 2.5, 100.9, 127.0], np.float32),
    "f32-special": np.array([np.nan, np.inf, -np.inf, 1e5, -1e5, 3.0e38, 1e-8], np.float32),
    "f64": np.array([1 + 2**-30, -3.99, 1e300, 0.1], np.float64),
    "f16": np.array([-2.5, 0.0, 65504.0, 1e-4], np.float16),
    "bf16": np.array([-2.5, 0.0, 3.0e38, 1.0078125], BF16),
    "f16-special": np.array([np.nan, -0.0, 0.0, np.inf, 2.0], np.float16),
    "bf16-special": np.array([np.nan, -0.0, 0.0, -np.inf, 2.0], BF16),
    "i64": np.array([-129, -1, 0, 200, 70000, 2**40 + 1], np.int64),
    "i8": np.array([-128, -1, 0, 127], np.int8),
    "u8": np.array([0, 1, 200, 255], np.uint8),
    "bool": np.array([True, False, True]),
}
# (source, target): float->int only where every value is in range (ONNX leaves the rest undefined)
CASTS = [("f32", t) for t in ("i32", "i64", "i8", "f16", "bf16", "f64", "bool", "f32")]
CASTS += [("f32-special", t) for t in ("f16", "bf16", "f64", "bool")]
CASTS += [("f64", t) for t in ("f32", "f16", "bf16", "bool")]
CASTS += [("f16", t) for t in ("f32", "i32", "bool")]
CASTS += [("bf16", t) for t in ("f32", "f16", "i32")]
CASTS += [("f16-special", t) for t in ("bool", "f32", "bf16")]
CASTS += [("bf16-special", t) for t in ("bool", "f32", "f16")]
CASTS += [("i64", t) for t in ("i32", "i16", "i8", "u8", "u32", "f32", "f16", "bool")]
CASTS += [("i8", t) for t in ("u8", "i64", "f32", "bf16")]
CASTS += [("u8", t) for t in ("i8", "f16", "bool")]
CASTS += [("bool", t) for t in ("f32", "i64", "u8", "bf16")]


@pytest.mark.parametrize("src, to", [pytest.param(s, t, id=f"{s}->{t}") for s, t in CASTS])
def test_cast_matches_reference(src, to):
    x = CAST_SRC[src]
    onnx_to = helper.np_dtype_to_tensor_dtype(to_numpy_dtype(to))
    got = run_ir("Cast", [x], to=to)[0]
    assert got.dtype == to_numpy_dtype(to)
    with np.errstate(all="ignore"):
        want = run_onnx_reference("Cast", [x], to=onnx_to)[0]
    close(got, want, **tolerance(got.dtype))


@pytest.mark.parametrize("src, to", [pytest.param("f32", "i32", id="f32->i32"),
                                     pytest.param("i64", "f16", id="i64->f16"),
                                     pytest.param("bool", "f32", id="bool->f32")])
def test_castlike_matches_reference(src, to):
    x = CAST_SRC[src]
    check("CastLike", [x, np.zeros((2,), to_numpy_dtype(to))])


# -- errors --------------------------------------------------------------------------------
FZ = np.zeros((2, 3), np.float32)
IZ = np.zeros((2, 3), np.int32)
ERRORS = [
    ("Mod", [IZ, IZ], {"fmod": 2}, AttrError, r"node 'node' \(Mod\) param 'fmod' = 2"),
    ("BitShift", [IZ, IZ], {}, AttrError, r"node 'node' \(BitShift\) param 'direction': required"),
    ("BitShift", [IZ, IZ], {"direction": "UP"}, AttrError, r"node 'node' \(BitShift\) param 'direction'"),
    ("Cast", [FZ], {}, AttrError, r"node 'node' \(Cast\) param 'to': required"),
    ("Cast", [FZ], {"to": "float"}, AttrError, r"node 'node' \(Cast\) param 'to' = 'float'"),
    ("Add", [FZ, np.zeros((4,), np.float32)], {}, ShapeError, r"node 'node' \(Add\).*do not broadcast"),
    ("Sub", [FZ, IZ], {}, ShapeError, r"node 'node' \(Sub\): input 1 .* is i32"),
    ("Sum", [FZ, FZ, np.zeros((5,), np.float32)], {}, ShapeError, r"node 'node' \(Sum\).*do not broadcast"),
    ("BitwiseAnd", [FZ, FZ], {}, ShapeError, r"node 'node' \(BitwiseAnd\): input 0 .* has dtype f32"),
    ("Exp", [IZ], {}, ShapeError, r"node 'node' \(Exp\): input 0 .* has dtype i32"),
]


@pytest.mark.parametrize("op, inputs, attrs, err, match",
                         [pytest.param(*e, id=f"{e[0]}-{i}") for i, e in enumerate(ERRORS)])
def test_bad_input_names_node(op, inputs, attrs, err, match):
    with pytest.raises(err, match=match):
        run_ir(op, inputs, **attrs)
