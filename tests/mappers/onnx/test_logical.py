"""ONNX logical mappings: a converted one-node model against onnxruntime (opset >= 7) or
against numpy written from the ONNX spec (legacy opsets onnxruntime no longer runs)."""

from __future__ import annotations

import numpy as np
import pytest

from opbridge.errors import AttrError
from tests.conftest import requires_ort

from .test_activation import check_ort, convert_node, run_converted

pytestmark = requires_ort

SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3))]
SHAPE_IDS = ["same", "trailing", "both-grow", "scalar-a"]
F32 = np.float32


def small(shape, dtype, seed) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 4, shape).astype(dtype)


def bools(shape, seed) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2, shape).astype(bool)


COMPARE = [("Equal", 7), ("Equal", 19), ("Less", 9), ("Less", 13), ("Greater", 13),
           ("LessOrEqual", 16), ("GreaterOrEqual", 16)]


@pytest.mark.parametrize("dtype", [F32, np.int32, np.int64], ids=["f32", "i32", "i64"])
@pytest.mark.parametrize("sa, sb", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("op, opset", COMPARE, ids=[f"{o}-{v}" for o, v in COMPARE])
def test_comparison_matches_onnxruntime(op, opset, sa, sb, dtype):
    if op == "Equal" and opset < 11 and dtype == F32:
        pytest.skip("Equal takes float inputs from opset 11")
    check_ort(op, [small(sa, dtype, 1), small(sb, dtype, 2)], opset=opset)


def test_comparison_with_nan():
    a = np.array([np.nan, 1.0, np.inf, -np.inf], F32)
    for op in ("Equal", "Less", "Greater"):
        check_ort(op, [a, a[::-1].copy()], opset=13)


@pytest.mark.parametrize("sa, sb", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_boolean_matches_onnxruntime(op, sa, sb):
    check_ort(op, [bools(sa, 3), bools(sb, 4)], opset=7)


@pytest.mark.parametrize("op, fn", [("And", np.logical_and), ("Or", np.logical_or),
                                    ("Xor", np.logical_xor), ("Equal", np.equal),
                                    ("Less", np.less), ("Greater", np.greater)])
def test_legacy_broadcast_aligns_b_at_axis(op, fn):
    # opset 1, broadcast=1, axis=0: B of shape (2,) lines up with A's dim 0
    if op in ("And", "Or", "Xor"):
        a, b = bools((2, 3), 5), bools((2,), 6)
    else:
        a, b = small((2, 3), np.int32, 5), small((2,), np.int32, 6)
    y = run_converted(op, [a, b], opset=1, broadcast=1, axis=0)
    np.testing.assert_array_equal(y, fn(a, b[:, None]))


def test_not_matches_onnxruntime():
    check_ort("Not", [bools((2, 3, 4), 7)], opset=1)


WHERE = [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), ()), ((3, 1), (1, 4), (2, 1, 1))]


@pytest.mark.parametrize("dtype", [F32, np.int64, np.uint8], ids=["f32", "i64", "u8"])
@pytest.mark.parametrize("sc, sx, sy", WHERE, ids=["same", "row-scalar", "all-grow"])
@pytest.mark.parametrize("opset", [9, 16])
def test_where_matches_onnxruntime(opset, sc, sx, sy, dtype):
    check_ort("Where", [bools(sc, 8), small(sx, dtype, 9), small(sy, dtype, 10)], opset=opset)


EDGE = np.array([-np.inf, -1.0, 0.0, 1.0, np.inf, np.nan], F32)


@pytest.mark.parametrize("opset", [9, 13, 20])
def test_isnan_matches_onnxruntime(opset):
    check_ort("IsNaN", [EDGE], opset=opset)


@pytest.mark.parametrize("attrs", [{}, {"detect_negative": 0}, {"detect_positive": 0}],
                         ids=["attrs=absent", "detect_negative=0", "detect_positive=0"])
@pytest.mark.parametrize("opset", [10, 20])
def test_isinf_matches_onnxruntime(opset, attrs):
    check_ort("IsInf", [EDGE], opset=opset, **attrs)


def test_isinf_bad_attribute_value_names_node():
    with pytest.raises(AttrError, match=r"\(IsInf\) param 'detect_negative' = 3"):
        convert_node("IsInf", [EDGE], opset=20, detect_negative=3)
