"""Comparison, boolean, Where and IsNaN/IsInf ops: the IR interpreter against
onnx.reference.ReferenceEvaluator."""

from __future__ import annotations

import numpy as np
import pytest

from opbridge.errors import AttrError, ShapeError
from opbridge.ir.types import from_numpy_dtype

from .onnx_ref import run_ir
from .test_activation import BF16, EDGE, check

SHAPES = [
    pytest.param((2, 3, 4), (2, 3, 4), id="same"),
    pytest.param((2, 3, 4), (4,), id="trailing"),
    pytest.param((2, 1, 4), (3, 1), id="both-grow"),
    pytest.param((), (2, 3), id="scalar-a"),
]
DTYPES = [pytest.param(np.dtype(d), id=from_numpy_dtype(d))
          for d in (np.float32, np.float16, np.float64, np.int32, np.int64, np.uint8, np.int8)]
DTYPES.append(pytest.param(BF16, id="bf16"))


def small_ints(shape, dtype, seed) -> np.ndarray:
    """Values in a small range so that equal pairs occur; cast to ``dtype``."""
    return np.random.default_rng(seed).integers(0, 4, shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa, sb", SHAPES)
@pytest.mark.parametrize("op", ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"])
def test_comparison_matches_reference(op, sa, sb, dtype):
    check(op, [small_ints(sa, dtype, 1), small_ints(sb, dtype, 2)])


@pytest.mark.parametrize("op", ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"])
def test_comparison_with_nan_and_inf(op):
    a = EDGE.astype(np.float32)
    check(op, [a, a[::-1].copy()])
    check(op, [a, a.copy()])


def test_equal_on_bool():
    check("Equal", [np.array([True, False, True]), np.array([True, True, False])])


def test_comparison_output_is_bool():
    out = run_ir("Less", [np.zeros(3, np.float32), np.ones(3, np.float32)])[0]
    assert out.dtype == np.bool_ and out.all()


@pytest.mark.parametrize("sa, sb", SHAPES)
@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical_binary_matches_reference(op, sa, sb):
    rng = np.random.default_rng(3)
    check(op, [rng.integers(0, 2, sa).astype(bool), rng.integers(0, 2, sb).astype(bool)])


def test_not_matches_reference():
    check("Not", [np.random.default_rng(4).integers(0, 2, (2, 3, 4)).astype(bool)])


WHERE_SHAPES = [
    pytest.param((2, 3), (2, 3), (2, 3), id="same"),
    pytest.param((2, 3), (3,), (), id="x-row-y-scalar"),
    pytest.param((3, 1), (1, 4), (2, 1, 1), id="all-grow"),
    pytest.param((), (2, 3), (2, 3), id="scalar-condition"),
]


@pytest.mark.parametrize("dtype", DTYPES + [pytest.param(np.dtype(bool), id="bool")])
@pytest.mark.parametrize("sc, sx, sy", WHERE_SHAPES)
def test_where_matches_reference(sc, sx, sy, dtype):
    rng = np.random.default_rng(5)
    cond = rng.integers(0, 2, sc).astype(bool)
    check("Where", [cond, small_ints(sx, dtype, 6), small_ints(sy, dtype, 7)])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, BF16],
                         ids=["f32", "f16", "f64", "bf16"])
def test_isnan_matches_reference(dtype):
    check("IsNaN", [EDGE.astype(dtype)])


@pytest.mark.parametrize("attrs", [{}, {"detect_negative": 0}, {"detect_positive": 0},
                                   {"detect_negative": 0, "detect_positive": 0},
                                   {"detect_negative": 1, "detect_positive": 1}],
                         ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()) or "attrs=absent")
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, BF16],
                         ids=["f32", "f16", "f64", "bf16"])
def test_isinf_matches_reference(dtype, attrs):
    check("IsInf", [EDGE.astype(dtype)], **attrs)


# -- errors --------------------------------------------------------------------------------
FZ = np.zeros((2, 3), np.float32)
BZ = np.zeros((2, 3), bool)
ERRORS = [
    ("IsInf", [FZ], {"detect_negative": 2}, AttrError, r"node 'node' \(IsInf\) param 'detect_negative' = 2"),
    ("IsInf", [FZ], {"detect_sign": 1}, AttrError, r"node 'node' \(IsInf\) param 'detect_sign'"),
    ("And", [FZ, FZ], {}, ShapeError, r"node 'node' \(And\): input 0 .* has dtype f32"),
    ("Less", [BZ, BZ], {}, ShapeError, r"node 'node' \(Less\): input 0 .* has dtype bool"),
    ("Where", [FZ, FZ, FZ], {}, ShapeError, r"node 'node' \(Where\): input 0 \('condition'\)"),
    ("Where", [BZ, FZ, np.zeros((2, 3), np.int32)], {}, ShapeError, r"node 'node' \(Where\): input 2"),
    ("Equal", [FZ, np.zeros((4,), np.float32)], {}, ShapeError, r"node 'node' \(Equal\).*do not broadcast"),
    ("IsNaN", [np.zeros(3, np.int32)], {}, ShapeError, r"node 'node' \(IsNaN\): input 0"),
]


@pytest.mark.parametrize("op, inputs, attrs, err, match",
                         [pytest.param(*e, id=f"{e[0]}-{i}") for i, e in enumerate(ERRORS)])
def test_bad_input_names_node(op, inputs, attrs, err, match):
    with pytest.raises(err, match=match):
        run_ir(op, inputs, **attrs)
