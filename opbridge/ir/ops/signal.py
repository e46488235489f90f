"""Signal processing: STFT (ONNX STFT-17, torch.stft) and MelWeightMatrix (ONNX
MelWeightMatrix-17).

Semantics: https://onnx.ai/onnx/operators/onnx__STFT.html and
https://onnx.ai/onnx/operators/onnx__MelWeightMatrix.html. Complex values are a last axis of
2 (real, imaginary), as ONNX holds them. ONNX passes STFT's frame step and length and all of
MelWeightMatrix's operands as inputs; they set output shapes, so they are parameters here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import InterpretError
from ..opdef import ShapeContext, TypeAndShape, define_op
from ..types import to_numpy_dtype
from .common import FLOATS, NUMERIC


# -- STFT ----------------------------------------------------------------------------------
def _frame_length_fill(inputs: Sequence[TypeAndShape | None], attrs: dict[str, Any]) -> int | None:
    """ONNX's default frame length: the window's length, else the whole signal."""
    window = inputs[1] if len(inputs) > 1 else None
    if window is not None and len(window[0]) == 1 and isinstance(window[0][0], int):
        return window[0][0]
    signal = inputs[0] if inputs else None
    if window is None and signal is not None and len(signal[0]) == 3 and isinstance(signal[0][1], int):
        return signal[0][1]
    return None


def _stft_shape(ctx: ShapeContext) -> Any:
    shape = ctx.input_shape(0)
    if len(shape) != 3 or shape[2] not in (1, 2):
        raise ctx.error(f"signal has shape {list(shape)}; it needs [batch, signal_length, 1] "
                        "(real) or [batch, signal_length, 2] (complex)",
                        hint="reshape the signal to [batch, signal_length, 1]")
    n, step = ctx.attr("frame_length"), ctx.attr("frame_step")
    if n is None:
        raise ctx.error("is unknown: the window's and the signal's lengths are not static",
                        attr="frame_length", hint="give frame_length, or a window of static length")
    if n < 1:
        raise ctx.error(f"{n} must be >= 1", attr="frame_length",
                        hint="give a size of at least 1")
    if ctx.has_input(1):
        w = ctx.input_shape(1)
        # a window of symbolic length is checked when it arrives (stft)
        if len(w) != 1 or (isinstance(w[0], int) and w[0] != n):
            raise ctx.error(f"window has shape {list(w)}; it needs [{n}] (frame_length)",
                            hint="give a 1-D window of frame_length values")
        if ctx.input_dtype(1) != ctx.input_dtype(0):
            raise ctx.error(f"window is {ctx.input_dtype(1)}, signal {ctx.input_dtype(0)}; they "
                            "must match",
                            hint="give the window the signal's dtype (insert a Cast)")
    length = shape[1]
    if isinstance(length, int) and n > length:
        raise ctx.error(f"{n} is longer than the signal ({length})", attr="frame_length",
                        hint="a frame must fit in the signal")
    frames = ctx.dim_add(ctx.dim_floordiv(ctx.dim_sub(length, n), step), 1)
    bins = n // 2 + 1 if ctx.attr("onesided") else n
    return (shape[0], frames, bins, 2), ctx.input_dtype(0)


def stft(signal: np.ndarray, window: np.ndarray | None = None, *, frame_step: int,
         frame_length: int, onesided: int) -> np.ndarray:
    """[batch, frames, bins, 2]: the DFT of every windowed frame (unnormalised)."""
    n = frame_length
    if signal.shape[1] < n:
        raise InterpretError(f"the signal has {signal.shape[1]} samples, fewer than frame_length {n}",
                             hint="feed a signal of at least frame_length samples")
    if window is not None and window.shape != (n,):
        raise InterpretError(f"the window has shape {list(window.shape)}; it needs [{n}] (frame_length)",
                             hint="feed a 1-D window of frame_length values")
    frames = (signal.shape[1] - n) // frame_step + 1
    wide = np.float64 if signal.dtype == np.float64 else np.float32
    x = signal.astype(wide)
    z = x[..., 0] if x.shape[2] == 1 else x[..., 0] + 1j * x[..., 1]
    where = np.arange(frames)[:, None] * frame_step + np.arange(n)[None, :]  # [frames, n]
    framed = z[:, where]  # [batch, frames, n]
    if window is not None:
        framed = framed * window.astype(wide)
    spec = np.fft.fft(framed, axis=-1)
    if onesided:
        spec = spec[..., : n // 2 + 1]
    return np.stack([spec.real, spec.imag], axis=-1).astype(signal.dtype)


(
    define_op("STFT")
    .doc("The short-time Fourier transform of signal [batch, length, 1|2]: frames of "
         "`frame_length` every `frame_step`, times the window, through a DFT of frame_length "
         "points -> [batch, frames, bins, 2] (bins = frame_length // 2 + 1 when onesided).")
    .input("signal", "T").input("window", "T", optional=True).output("y", "T")
    .param("frame_step", "int", minimum=1)
    .param("frame_length", "int", fill=_frame_length_fill,
           doc="absent: the window's length, else the signal's")
    .param("onesided", "int", 1, allowed=(0, 1), doc="1: only the bins up to frame_length // 2")
    .type_param("T", FLOATS)
    .shape_fn(_stft_shape)
    .compute(stft)
)


# -- MelWeightMatrix -----------------------------------------------------------------------
def mel_bins(num_mel_bins: int, dft_length: int, sample_rate: int, lower_edge_hertz: float,
             upper_edge_hertz: float) -> np.ndarray:
    """The num_mel_bins + 2 DFT bins of the triangles' edges and centres, evenly spaced on the
    mel scale mel(f) = 2595 log10(1 + f / 700) (ONNX's definition)."""
    lo = 2595.0 * np.log1p(lower_edge_hertz / 700.0) / np.log(10.0)
    hi = 2595.0 * np.log1p(upper_edge_hertz / 700.0) / np.log(10.0)
    mels = np.arange(num_mel_bins + 2) * ((hi - lo) / (num_mel_bins + 2)) + lo
    hertz = 700.0 * np.expm1(mels / 2595.0 * np.log(10.0))
    return (((dft_length + 1) * hertz) // sample_rate).astype(np.int64)


def _mel_shape(ctx: ShapeContext) -> Any:
    n, dft, rate = ctx.attr("num_mel_bins"), ctx.attr("dft_length"), ctx.attr("sample_rate")
    lo, hi = ctx.attr("lower_edge_hertz"), ctx.attr("upper_edge_hertz")
    if not 0 <= lo < hi:
        raise ctx.error(f"lower_edge_hertz {lo} and upper_edge_hertz {hi}: they need "
                        "0 <= lower < upper", attr="upper_edge_hertz",
                        hint="give a frequency range in hertz, lower edge first")
    spec_bins = dft // 2 + 1
    top = int(mel_bins(n, dft, rate, lo, hi)[-1])
    if top >= spec_bins:
        raise ctx.error(f"{hi} Hz falls in DFT bin {top}, past the {spec_bins} bins of a "
                        f"{dft}-point DFT at {rate} Hz", attr="upper_edge_hertz",
                        hint=f"keep upper_edge_hertz below sample_rate / 2 ({rate / 2} Hz)")
    if ctx.attr("dtype") not in NUMERIC:
        raise ctx.error(f"{ctx.attr('dtype')} is not numeric", attr="dtype",
                        hint="give a numeric dtype (a float or integer type)")
    return (spec_bins, n), ctx.attr("dtype")


def mel_weight_matrix(*, num_mel_bins: int, dft_length: int, sample_rate: int,
                      lower_edge_hertz: float, upper_edge_hertz: float, dtype: str) -> np.ndarray:
    """[dft_length // 2 + 1, num_mel_bins]: triangle i rises from bin f[i] to 1 at f[i+1] and
    falls to 0 at f[i+2] (a triangle whose rise is empty is 1 at its centre)."""
    f = mel_bins(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz)
    low, mid, high = f[:-2][None, :], f[1:-1][None, :], f[2:][None, :]  # [1, mels]
    j = np.arange(dft_length // 2 + 1)[:, None]  # [bins, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        rise = np.where(mid > low, (j - low) / (mid - low), (j == mid).astype(np.float64))
        fall = (high - j) / (high - mid)
    out = np.where((j >= mid) & (j < high), fall, np.where((j >= low) & (j <= mid), rise, 0.0))
    return out.astype(to_numpy_dtype(dtype))


(
    define_op("MelWeightMatrix")
    .doc("The [dft_length // 2 + 1, num_mel_bins] matrix of triangular mel filters over "
         "[lower_edge_hertz, upper_edge_hertz], each peaking at 1, that turns a linear "
         "spectrum into a mel spectrum by right-multiplication.")
    .output("y", "T")
    .param("num_mel_bins", "int", minimum=1)
    .param("dft_length", "int", minimum=1)
    .param("sample_rate", "int", minimum=1)
    .param("lower_edge_hertz", "float", minimum=0.0)
    .param("upper_edge_hertz", "float", minimum=0.0)
    .param("dtype", "dtype", "f32", doc="the output's dtype (ONNX's output_datatype)")
    .type_param("T", NUMERIC)
    .shape_fn(_mel_shape)
    .compute(mel_weight_matrix)
)
