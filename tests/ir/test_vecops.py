"""``opbridge.ir.vecops.relu`` (max(x, 0) against a shared read-only zero buffer) against the
onnx reference's Relu and onnxruntime's, value for value: NaN, infinities, signed zeros,
denormals, every dtype the IR's Relu takes, and tensors larger than the buffer (in chunks)."""

from __future__ import annotations

import numpy as np
import pytest

from opbridge.ir import vecops

from .ops.onnx_ref import run_ir, run_onnx_reference
from .ops.test_conv import run_ort

SPECIAL = [-0.0, 0.0, np.nan, -np.inf, np.inf, -1.5, 2.5, 1e-45, -1e-45, -3e38, 3e38]


def _input(dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    if np.dtype(dtype).kind == "f":
        flat = x.reshape(-1)
        with np.errstate(over="ignore"):
            flat[:len(SPECIAL)] = np.array(SPECIAL).astype(dtype)[: flat.size]
    return x


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), np.flatnonzero(got.view(np.uint8) != want.view(np.uint8))[:5]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int32, np.int64])
def test_relu_matches_onnx_reference(dtype: type) -> None:
    x = _input(dtype, (2, 3, 17, 19))
    want = run_onnx_reference("Relu", [x], opset=14)[0]
    _same_bits(vecops.relu(x), want)
    _same_bits(run_ir("Relu", [x])[0], want)  # the IR op's compute


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_matches_onnxruntime(dtype: type) -> None:
    x = _input(dtype, (1, 64, 56, 56))
    want = run_ort("Relu", [x], opset=14)[0]
    got = vecops.relu(x)
    finite = ~np.isnan(want)
    assert np.array_equal(np.isnan(got), ~finite)
    assert np.array_equal(got[finite], want[finite])


def test_relu_in_place_and_buffer_untouched() -> None:
    x = _input(np.float32, (5, 7, 11))
    want = run_onnx_reference("Relu", [x.copy()], opset=14)[0]
    out = vecops.relu(x, out=x)
    assert out is x
    _same_bits(x, want)
    zeros = vecops._zero_buffer(x.dtype)
    assert not zeros.flags.writeable and not zeros.any()
    with pytest.raises(ValueError):
        zeros[:3] = 1  # the shared buffer is read-only: no caller can spoil it


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tensors_larger_than_the_buffer_go_in_chunks(monkeypatch: pytest.MonkeyPatch,
                                                     dtype: type) -> None:
    monkeypatch.setattr(vecops, "CHUNK", 1000)
    x = _input(dtype, (3, 37, 41))  # 4551 elements: four whole chunks and a part
    want = run_onnx_reference("Relu", [x], opset=14)[0]
    _same_bits(vecops.relu(x), want)
    assert vecops._zero_buffer(x.dtype).size == 1000
    y = x.copy()
    assert vecops.relu(y, out=y) is y
    _same_bits(y, want)
    xt = x.transpose(2, 0, 1)  # not contiguous: the whole tensor in one call
    _same_bits(vecops.relu(xt), np.ascontiguousarray(want.transpose(2, 0, 1)))
