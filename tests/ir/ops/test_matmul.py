"""MatMul, Gemm, MatMulInteger, Einsum against the onnx reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import AttrError, ShapeError

from .onnx_ref import assert_close, run_ir, run_onnx_reference

RNG = np.random.default_rng(5)


def _x(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


MATMUL_SHAPES = {
    "2d": ((3, 4), (4, 5)),
    "1d@2d": ((4,), (4, 5)),
    "2d@1d": ((3, 4), (4,)),
    "1d@1d": ((4,), (4,)),
    "batch": ((2, 3, 4), (2, 4, 5)),
    "batch-broadcast": ((2, 1, 3, 4), (5, 4, 2)),
    "batch@2d": ((2, 3, 3, 4), (4, 2)),
    "1d@batch": ((4,), (3, 4, 2)),
}


@pytest.mark.parametrize("case", list(MATMUL_SHAPES))
def test_matmul_shapes(case: str) -> None:
    sa, sb = MATMUL_SHAPES[case]
    a, b = _x(*sa), _x(*sb)
    assert_close(run_ir("MatMul", [a, b])[0], run_onnx_reference("MatMul", [a, b])[0], rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int64, np.uint32],
                         ids=["f16", "f64", "i32", "i64", "u32"])
def test_matmul_dtypes(dtype: Any) -> None:
    a = RNG.integers(0, 5, (3, 4)).astype(dtype)
    b = RNG.integers(0, 5, (4, 2)).astype(dtype)
    got = run_ir("MatMul", [a, b])[0]
    assert got.dtype == dtype
    assert_close(got, run_onnx_reference("MatMul", [a, b])[0])


GEMM_ATTRS = {
    "absent": {},
    "alpha-beta": {"alpha": 0.5, "beta": 2.0},
    "transA": {"transA": 1},
    "transB": {"transB": 1},
    "both": {"transA": 1, "transB": 1, "alpha": -1.5},
    "beta=0": {"beta": 0.0},
}


@pytest.mark.parametrize("c_shape", [None, (), (5,), (1, 5), (3, 1), (3, 5)],
                         ids=["C=absent", "C=scalar", "C=N", "C=1xN", "C=Mx1", "C=MxN"])
@pytest.mark.parametrize("case", list(GEMM_ATTRS))
def test_gemm(case: str, c_shape: tuple[int, ...] | None) -> None:
    attrs = GEMM_ATTRS[case]
    a = _x(4, 3) if attrs.get("transA") else _x(3, 4)
    b = _x(5, 4) if attrs.get("transB") else _x(4, 5)
    c = None if c_shape is None else _x(*c_shape)
    assert_close(run_ir("Gemm", [a, b, c], **attrs)[0],
                 run_onnx_reference("Gemm", [a, b, c], **attrs)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("zp", ["absent", "scalar", "per-column-b"])
@pytest.mark.parametrize("types", [(np.uint8, np.uint8), (np.int8, np.uint8), (np.uint8, np.int8)],
                         ids=["u8u8", "i8u8", "u8i8"])
def test_matmul_integer(types: tuple[Any, Any], zp: str) -> None:
    ta, tb = types
    a = RNG.integers(np.iinfo(ta).min, np.iinfo(ta).max, (3, 4)).astype(ta)
    b = RNG.integers(np.iinfo(tb).min, np.iinfo(tb).max, (4, 2)).astype(tb)
    if zp == "absent":
        args: list[Any] = [a, b]
    elif zp == "scalar":
        args = [a, b, np.array(3, ta), np.array(5, tb)]
    else:
        args = [a, b, np.array(1, ta), np.array([4, 7], tb)]
    got = run_ir("MatMulInteger", args)[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, run_onnx_reference("MatMulInteger", args)[0])


def test_matmul_integer_per_row_a_zero_point() -> None:
    # the spec allows a per-row zero point for A; onnx.reference cannot broadcast it, so the
    # expected value is the definition written as loops
    a = RNG.integers(0, 255, (3, 4)).astype(np.uint8)
    b = RNG.integers(-128, 127, (4, 2)).astype(np.int8)
    za, zb = np.array([1, 2, 3], np.uint8), np.array([4, -7], np.int8)
    expected = np.zeros((3, 2), np.int64)
    for i in range(3):
        for j in range(2):
            expected[i, j] = sum((int(a[i, k]) - int(za[i])) * (int(b[k, j]) - int(zb[j]))
                                 for k in range(4))
    np.testing.assert_array_equal(run_ir("MatMulInteger", [a, b, za, zb])[0], expected)


EINSUM = {
    "matmul": ("ij,jk->ik", [(3, 4), (4, 5)]),
    "batch-matmul": ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    "transpose": ("ij->ji", [(3, 4)]),
    "trace": ("ii", [(4, 4)]),
    "diag": ("ii->i", [(4, 4)]),
    "sum-all": ("ij->", [(3, 4)]),
    "implicit": ("ij,jk", [(3, 4), (4, 5)]),
    "ellipsis": ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 5)]),
    "ellipsis-implicit": ("...j,j", [(2, 3, 4), (4,)]),
    "attention": ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    "outer": ("i,j->ij", [(3,), (4,)]),
    "three-operands": ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    "spaces": ("i j , j k -> i k", [(2, 3), (3, 4)]),
}


@pytest.mark.parametrize("case", list(EINSUM))
def test_einsum(case: str) -> None:
    eq, shapes = EINSUM[case]
    xs = [_x(*s) for s in shapes]
    assert_close(run_ir("Einsum", xs, equation=eq)[0],
                 run_onnx_reference("Einsum", xs, equation=eq)[0], rtol=1e-5, atol=1e-5)


# -- errors --------------------------------------------------------------------------------
def _build(op: str, shapes: list[tuple[int, ...]], **attrs: Any) -> None:
    b = ob.GraphBuilder("bad")
    vals = [b.input(f"i{i}", "f32", s) for i, s in enumerate(shapes)]
    b.output(b.op(op, vals, name="n1", **attrs))
    b.build()


def test_matmul_inner_dims_differ() -> None:
    with pytest.raises(ShapeError, match=r"node 'n1' \(MatMul\): inner dimensions differ"):
        _build("MatMul", [(3, 4), (5, 6)])


def test_gemm_transposes_that_do_not_fit() -> None:
    with pytest.raises(AttrError, match=r"\(Gemm\) param 'transB'.*inner dimensions differ"):
        _build("Gemm", [(3, 4), (4, 5)], transB=1)


def test_gemm_needs_2d() -> None:
    with pytest.raises(ShapeError, match=r"\(Gemm\).*must both be 2-D"):
        _build("Gemm", [(2, 3, 4), (4, 5)])


@pytest.mark.parametrize("eq", ["ij,jk->ik", "ij->iz", "i1->i", "ij,jk"],
                         ids=["operand-count", "unknown-output-label", "bad-char", "wrong-rank"])
def test_einsum_bad_equation(eq: str) -> None:
    shapes = [(3, 4)] if eq != "ij,jk" else [(3, 4), (4, 5, 6)]
    with pytest.raises(AttrError, match=r"\(Einsum\) param 'equation'"):
        _build("Einsum", shapes, equation=eq)


def test_einsum_label_size_mismatch() -> None:
    with pytest.raises(AttrError, match=r"label 'j' is 4 in one operand and 5"):
        _build("Einsum", [(3, 4), (5, 2)], equation="ij,jk->ik")
