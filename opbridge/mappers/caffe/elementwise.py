"""Caffe Eltwise (SUM with coefficients, PROD, MAX) and the Axpy fork layer."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..registry import mapping
from .common import Params

CAFFE = Framework.CAFFE


@mapping(CAFFE, "Eltwise")
def eltwise(node: OriginNode, g: Any) -> Value:
    """SUM (sum of coeff_i * x_i; coeff all 1 when absent), PROD, or MAX of the bottoms."""
    p = Params(node, "eltwise_param")
    xs = g.inputs()
    if len(xs) < 2:
        raise g.error(f"takes at least 2 bottoms, got {len(xs)}")
    op = p.get("operation")
    coeff = p.floats("coeff")
    if coeff and op != "SUM":
        raise p.error("coeff", coeff, "only the SUM operation takes coefficients")
    if coeff and len(coeff) != len(xs):
        raise p.error("coeff", coeff, f"give one coefficient per bottom ({len(xs)})")
    if op == "MAX":
        return g.op("Max", xs)
    if op == "PROD":
        y = xs[0]
        for x in xs[1:]:
            y = g.op("Mul", [y, x])
        return y
    terms = []
    for i, x in enumerate(xs):
        c = coeff[i] if coeff else 1.0
        terms.append(x if c == 1.0 else g.op("Mul", [x, g.constant(np.array(c, np.float32))]))
    y = terms[0]
    for t in terms[1:]:
        y = g.op("Add", [y, t])
    return y


@mapping(CAFFE, "Axpy")
def axpy(node: OriginNode, g: Any) -> Value:
    """a * x + y with a of shape (N, C, 1, 1) (the SENet/MobileNet fork layer)."""
    if g.num_inputs != 3:
        raise g.error(f"takes 3 bottoms (a, x, y), got {g.num_inputs}")
    a, x, y = g.inputs()
    return g.op("Add", [g.op("Mul", [a, x]), y])
