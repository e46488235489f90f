"""The reference helpers agree with each other on a trivial op (guards the harness itself)."""

from __future__ import annotations

import numpy as np

from .onnx_ref import assert_close, run_ir, run_onnx_reference


def test_relu_ir_matches_reference_evaluator():
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    assert_close(run_ir("Relu", [x])[0], run_onnx_reference("Relu", [x])[0])
    assert (run_ir("Relu", [x])[0] >= 0).all()
