"""ONNX MatMul / Gemm / MatMulInteger / Einsum mappings against onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from opbridge.errors import OpbridgeError
from tests.conftest import requires_ort

from .test_conv import check, convert_node, randn

pytestmark = requires_ort


@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((4,), (4, 5)), ((2, 3, 4), (4,)),
                                    ((2, 1, 3, 4), (5, 4, 2))],
                         ids=["2d", "1d@2d", "batch@1d", "broadcast"])
@pytest.mark.parametrize("opset", [1, 9, 13])
def test_matmul(shapes: tuple[tuple[int, ...], ...], opset: int) -> None:
    check("MatMul", [randn(*shapes[0]), randn(*shapes[1], seed=1)], opset=max(opset, 7), rtol=1e-4)


# C is optional from Gemm-11
_GEMM_C = [(c, o) for c in ("absent", "vector", "matrix") for o in (7, 9, 11, 13)
           if not (c == "absent" and o < 11)]


@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.5, "beta": 2.0}, {"transA": 1}, {"transB": 1},
                                   {"transA": 1, "transB": 1}],
                         ids=["absent", "alpha-beta", "transA", "transB", "both"])
@pytest.mark.parametrize("c, opset", _GEMM_C, ids=[f"C={c}-{o}" for c, o in _GEMM_C])
def test_gemm(opset: int, c: str, attrs: dict[str, Any]) -> None:
    a = randn(4, 3) if attrs.get("transA") else randn(3, 4)
    b = randn(5, 4, seed=1) if attrs.get("transB") else randn(4, 5, seed=1)
    ins = [a, b] + ([] if c == "absent" else [randn(5, seed=2) if c == "vector" else randn(3, 5, seed=2)])
    check("Gemm", ins, opset=opset, initializers=[False, True, True][: len(ins)], rtol=1e-4, **attrs)


def test_gemm_emits_one_ir_gemm_with_transposes() -> None:
    g, _, _ = convert_node("Gemm", [randn(4, 3), randn(5, 4)], opset=13, transA=1, transB=1)
    assert [n.op for n in g.nodes] == ["Gemm"]
    assert (g.nodes[0].attrs["transA"], g.nodes[0].attrs["transB"]) == (1, 1)


@pytest.mark.parametrize("zp", [False, True], ids=["zero_points=absent", "zero_points"])
def test_matmul_integer(zp: bool) -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 255, (3, 4)).astype(np.uint8)
    b = rng.integers(0, 255, (4, 2)).astype(np.uint8)
    ins = [a, b] + ([np.array(12, np.uint8), np.array([3, 200], np.uint8)] if zp else [])
    check("MatMulInteger", ins, opset=10)


@pytest.mark.parametrize("eq, shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("...ij->...ji", [(2, 3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
], ids=["matmul", "attention", "ellipsis-transpose", "diag", "dot-all"])
def test_einsum(eq: str, shapes: list[tuple[int, ...]]) -> None:
    check("Einsum", [randn(*s, seed=i) for i, s in enumerate(shapes)], opset=12, rtol=1e-4,
          equation=eq)


def test_einsum_equation_required() -> None:
    with pytest.raises(OpbridgeError, match=r"attribute 'equation': required"):
        convert_node("Einsum", [randn(2, 2)], opset=12)
