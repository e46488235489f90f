"""Kernels of element-wise arithmetic: tileable on N, H and W.

A broadcast input (a dimension of 1 against the output's) is taken whole; the layer-group
compiler's default row mapping does that, so these kernels need no ``input_slice``. Rank-2/3
operands (a transformer's residual adds, GELU spelt out with Erf) tile the same way on their
rank-4 view (batch, 1, tokens, features).
"""

from __future__ import annotations

import numpy as np

from .registry import register_kernel

BINARY = ("Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean", "Pow", "Mod", "Where",
          "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor")
UNARY = ("Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign",
         "Erf", "Sin", "Cos", "Not", "Cast")

def add_into(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    if a.dtype != out.dtype or b.dtype != out.dtype:
        out[...] = a + b
    else:
        np.add(a, b, out=out)


for _op in BINARY + UNARY:
    k = register_kernel(_op).split("N", "H", "W").row_layout().volumes()
    if _op == "Add":
        k.compute_into(add_into)
