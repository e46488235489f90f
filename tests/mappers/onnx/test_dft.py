"""ONNX DFT (opset 17: axis attribute; opset 20: axis input) against numpy.fft, with a tolerance
suited to float32 rather than the node suite's atol=1e-7 (see tests/conformance/skips.py).

numpy.fft is the outside reference: the forward and inverse transforms of complex input, the
inverse of a one-sided spectrum (irfft), and zero-padding / truncation by dft_length.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob

RTOL, ATOL = 1e-5, 1e-5


def _model(x: np.ndarray, opset: int, axis: int, length: int | None, **attrs: int) -> ob.Graph:
    inits, ins = [], ["x", ""]
    if length is not None:
        inits.append(numpy_helper.from_array(np.array(length, np.int64), "len"))
        ins[1] = "len"
    if opset >= 20:
        inits.append(numpy_helper.from_array(np.array(axis, np.int64), "axis"))
        ins.append("axis")
    else:
        attrs["axis"] = axis
    while ins and ins[-1] == "":
        ins.pop()
    node = helper.make_node("DFT", ins, ["y"], name="dft", **attrs)
    graph = helper.make_graph([node], "dft", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return ob.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


def _run(x: np.ndarray, opset: int, axis: int, length: int | None = None, **attrs: int) -> np.ndarray:
    g = _model(x, opset, axis, length, **attrs)
    return np.asarray(ob.interpret(g, {"x": x})["y"])


def _complex(shape: tuple[int, ...], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(ONNX layout [..., 2] float32, the same signal as complex128)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((*shape, 2)).astype(np.float32)
    return x, x[..., 0].astype(np.float64) + 1j * x[..., 1].astype(np.float64)


def _as_onnx(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("length", [None, 6, 11], ids=["dft_length=absent", "dft_length=6", "dft_length=11"])
def test_inverse_of_complex_input_matches_numpy_ifft(opset: int, length: int | None) -> None:
    x, z = _complex((2, 8, 3), seed=opset)
    got = _run(x, opset, axis=1, length=length, inverse=1)
    np.testing.assert_allclose(got, _as_onnx(np.fft.ifft(z, n=length, axis=1)), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("opset", [17, 20])
def test_forward_of_complex_input_matches_numpy_fft(opset: int) -> None:
    x, z = _complex((2, 3, 8), seed=5)
    got = _run(x, opset, axis=2)
    np.testing.assert_allclose(got, _as_onnx(np.fft.fft(z, axis=2)), rtol=RTOL, atol=1e-4)


def test_inverse_undoes_forward() -> None:
    x, _ = _complex((1, 16), seed=7)
    spectrum = _run(x, 17, axis=1)
    np.testing.assert_allclose(_run(spectrum, 17, axis=1, inverse=1), x, rtol=RTOL, atol=ATOL)


def test_inverse_of_a_pure_tone_has_the_positive_frequency_sign() -> None:
    """One spectral line at bin 1: ifft gives exp(+2 pi i n / N) / N, so a flipped sign in the
    inverse shows as a conjugated (negative-frequency) tone."""
    n = 8
    spec = np.zeros((1, n, 2), np.float32)
    spec[0, 1, 0] = 1.0
    got = _run(spec, 17, axis=1, inverse=1)[0]
    k = np.arange(n)
    want = np.stack([np.cos(2 * np.pi * k / n), np.sin(2 * np.pi * k / n)], axis=-1) / n
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_onesided_inverse_matches_numpy_irfft() -> None:
    rng = np.random.default_rng(3)
    signal = rng.standard_normal((2, 10))
    half = np.fft.rfft(signal, axis=1)                   # 6 bins of a 10-point real signal
    got = _run(_as_onnx(half).astype(np.float32), 17, axis=1, inverse=1, onesided=1)
    np.testing.assert_allclose(got[..., 0], np.fft.irfft(half, n=10, axis=1), rtol=RTOL, atol=ATOL)
