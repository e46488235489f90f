"""The vectorised erf (Cody's rational approximations) against Python's math.erf, over every
range it switches between, special values included."""

from __future__ import annotations

import math

import numpy as np
import pytest

from opbridge.ir.ops.activation import BLOCK, _gelu, erf

POINTS = np.concatenate([
    np.linspace(-30.0, 30.0, 60001),
    np.random.default_rng(0).standard_normal(BLOCK + 17) * 3,  # more than one block
    [0.0, -0.0, 1e-30, -1e-30, 0.46875, -0.46875, 4.0, -4.0, 26.5, 27.0, 1e10],
])


@pytest.mark.parametrize("dtype,rel", [(np.float64, 4 * 2.0**-52), (np.float32, 8 * 2.0**-23)],
                         ids=["f64", "f32"])
def test_erf_matches_math_erf(dtype, rel):
    x = POINTS.astype(dtype)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    got = erf(x).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=rel, atol=0)
    assert np.signbit(erf(np.array([-0.0], dtype)))[0]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_erf_special_values(dtype):
    got = erf(np.array([np.inf, -np.inf, np.nan], dtype))
    assert got[0] == 1.0 and got[1] == -1.0 and np.isnan(got[2])
    assert erf(np.zeros((2, 0, 3), dtype)).shape == (2, 0, 3)


def test_gelu_matches_its_definition_blockwise():
    x = (np.random.default_rng(1).standard_normal((3, BLOCK // 2 + 5)) * 4).astype(np.float32)
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64).ravel()])
    got = _gelu(x, "none")
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got.ravel(), want, rtol=1e-6, atol=1e-6)
