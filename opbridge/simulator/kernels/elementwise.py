"""Kernels of element-wise arithmetic: tileable on N, H and W.

A broadcast input (a dimension of 1 against the output's) is taken whole; the layer-group
compiler's default row mapping does that, so these kernels need no ``input_slice``.
"""

from __future__ import annotations

from .registry import register_kernel

BINARY = ("Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean", "Pow", "Mod", "Where",
          "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor")
UNARY = ("Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign",
         "Erf", "Sin", "Cos", "Not", "Cast")

for _op in BINARY + UNARY:
    register_kernel(_op).split("N", "H", "W")
