"""Elementwise arithmetic with numpy broadcasting."""

from __future__ import annotations

import numpy as np

from ..opdef import define_op
from .common import NUMERIC, broadcast_fn

(
    define_op("Add")
    .doc("a + b, numpy broadcasting")
    .input("a", "T").input("b", "T").output("c", "T")
    .type_param("T", NUMERIC)
    .shape_fn(broadcast_fn())
    .compute(lambda a, b: np.add(a, b))
)
