"""Activation functions."""

from __future__ import annotations

import numpy as np

from ..opdef import define_op
from .common import FLOATS, NUMERIC, same_shape

(
    define_op("Relu")
    .doc("max(x, 0)")
    .input("x", "T").output("y", "T")
    .type_param("T", NUMERIC)
    .shape_fn(same_shape)
    .compute(lambda x: np.maximum(x, np.zeros((), x.dtype)))
)

(
    define_op("Sigmoid")
    .doc("1 / (1 + exp(-x))")
    .input("x", "T").output("y", "T")
    .type_param("T", FLOATS)
    .shape_fn(same_shape)
    .compute(lambda x: (1.0 / (1.0 + np.exp(-x))).astype(x.dtype))
)
