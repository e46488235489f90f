"""Kernels of the activation functions: element by element, so tileable on N, H and W (of
rank-2/3 tensors too, in the row layout: a transformer's GELU)."""

from __future__ import annotations

import numpy as np

from ...ir.vecops import relu
from .registry import register_kernel

#: Activations whose cost is about one EU operation per element.
CHEAP = ("Relu", "LeakyRelu", "PRelu", "Clip", "ThresholdedRelu", "Shrink", "HardSigmoid",
         "HardSwish", "Softsign", "Identity")
#: Activations evaluated through a transcendental (exp, tanh, erf): a few operations each.
TRANSCENDENTAL = ("Sigmoid", "Tanh", "Elu", "Selu", "Celu", "Gelu", "Mish", "Softplus", "Swish")


def _per_element(ops: float):
    def cost(node, out_shape) -> float:
        n = 1
        for d in out_shape:
            n *= d
        return ops * n

    return cost


def relu_into(out: np.ndarray, x: np.ndarray) -> None:
    relu(x, out=out)


for _op in CHEAP:
    k = register_kernel(_op).split("N", "H", "W").row_layout().volumes().cost(_per_element(1.0))
    if _op == "Relu":
        k.compute_into(relu_into)
for _op in TRANSCENDENTAL:
    register_kernel(_op).split("N", "H", "W").row_layout().volumes().cost(_per_element(4.0))
