"""ONNX mappings: MatMul, Gemm, MatMulInteger, Einsum.

Semantics: https://onnx.ai/onnx/operators/. MatMul has numpy semantics in every version.
Gemm-1..6 had a 'broadcast' flag for C (numpy-style unidirectional broadcasting is what the
IR does, and what the flag asked for); Gemm-11 made C optional. The IR Gemm takes transA/
transB itself, so Gemm maps one-to-one.
"""

from __future__ import annotations

from typing import Any

from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import checked_attrs, one_to_one, required_input

ONNX = Framework.ONNX

one_to_one("MatMul", 1, num_inputs=2)


def _gemm(node: OriginNode, g: MapContext, known: tuple[str, ...], c_optional: bool) -> Any:
    checked_attrs(node, g, known)
    a, b = required_input(g, 0, "A"), required_input(g, 1, "B")
    c = g.input(2) if c_optional else required_input(g, 2, "C")
    return g.op("Gemm", [a, b, c], alpha=float(node.get_attr("alpha")),
                beta=float(node.get_attr("beta")), transA=int(node.get_attr("transA")),
                transB=int(node.get_attr("transB")))


@mapping(ONNX, "Gemm", since_opset=1)
def gemm_v1(node: OriginNode, g: MapContext) -> Any:
    return _gemm(node, g, ("alpha", "beta", "transA", "transB", "broadcast"), c_optional=False)


@mapping(ONNX, "Gemm", since_opset=7)
def gemm_v7(node: OriginNode, g: MapContext) -> Any:
    return _gemm(node, g, ("alpha", "beta", "transA", "transB"), c_optional=False)


@mapping(ONNX, "Gemm", since_opset=11)
def gemm_v11(node: OriginNode, g: MapContext) -> Any:
    return _gemm(node, g, ("alpha", "beta", "transA", "transB"), c_optional=True)


@mapping(ONNX, "MatMulInteger", since_opset=10)
def matmul_integer(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ())
    ins = [required_input(g, 0, "A"), required_input(g, 1, "B"), g.input(2), g.input(3)]
    return g.op("MatMulInteger", ins)


@mapping(ONNX, "Einsum", since_opset=12)
def einsum(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("equation",))
    eq = node.get_attr("equation", None)
    if eq is None:
        raise g.error("required but absent", attr="equation")
    if g.num_inputs == 0:
        raise g.error("needs at least one input")
    ins = [required_input(g, i, f"Inputs[{i}]") for i in range(g.num_inputs)]
    return g.op("Einsum", ins, equation=eq.decode() if isinstance(eq, bytes) else str(eq))
