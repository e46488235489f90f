"""Linear algebra on batches of matrices: Det (ONNX Det-11/22, torch.linalg.det).

Semantics: https://onnx.ai/onnx/operators/onnx__Det.html — x is [*, M, M], y is [*] (a 2-D x
gives a scalar).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op
from .common import FLOATS


def _det_shape(ctx: ShapeContext) -> Any:
    shape = ctx.input_shape(0)
    if len(shape) < 2 or not ctx.dims_equal(shape[-1], shape[-2]):
        raise ctx.error(f"X has shape {list(shape)}; it needs square matrices in its last two "
                        "axes, [*, M, M]", hint="give a tensor whose last two dims are equal")
    return tuple(shape[:-2]), ctx.input_dtype(0)


def det(x: np.ndarray) -> np.ndarray:
    """The determinant of every matrix of x (the half types numpy lacks computed in float32)."""
    wide = x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)
    return np.asarray(np.linalg.det(wide)).astype(x.dtype)


(
    define_op("Det")
    .doc("The determinant of each square matrix in the last two axes of x: [*, M, M] -> [*].")
    .input("x", "T").output("y", "T")
    .type_param("T", FLOATS)
    .shape_fn(_det_shape)
    .compute(det)
)
