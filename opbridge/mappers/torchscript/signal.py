"""``torch.stft`` (``aten::stft``) onto the IR's STFT, and ``aten::view_as_real`` of its result.

torch frames a signal [L] or [B, L] with windows of ``win_length`` samples zero-padded to
``n_fft`` about their centre, every ``hop_length`` (default n_fft // 4), and returns
[B, bins, frames] complex values (``normalized``: times n_fft ** -0.5). ``center=True`` pads the
signal in Python before ``aten::stft``, so a traced graph holds that pad as its own node. The IR
has no complex dtype: a complex value is a last axis of 2 (real, imaginary), which is what
``view_as_real`` gives, so a complex STFT converts only when view_as_real is all that reads it.
Checked on traced and scripted modules (a scripted ``center=True`` pad reshapes through the list
slice ``input.shape[-signal_dim:]``, which the list overload of ``aten::slice`` computes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.types import to_numpy_dtype
from ...parsers.origin import OriginNode
from ..context import MapContext
from .common import Args, ts_mapping


def _window(g: MapContext, a: Args, n_fft: int, win: int, dtype: str) -> Any:
    """The window, zero-padded about its centre to n_fft points (torch's rule)."""
    w = a.optional_tensor(4)
    if w is None:
        w = g.constant(np.ones(win, to_numpy_dtype(dtype)))
    if len(w.shape) != 1 or w.shape[0] != win:
        raise g.error(f"window has shape {list(w.shape)}; it needs [{win}] (win_length)",
                      hint="give a 1-D window of win_length values")
    left = (n_fft - win) // 2
    if left or n_fft - win - left:
        w = g.op("Pad", [w], pads=[left, n_fft - win - left])
    return w


def _is_aten(node: OriginNode, op: str) -> bool:
    return node.domain == "aten" and node.op_type == op


def _complex_readers_ok(node: OriginNode, g: MapContext) -> bool:
    """Whether every node reading the complex result is view_as_real (see the module's doc)."""
    out = node.outputs[0]
    readers = [n for n in g.origin_graph.nodes if out in n.inputs]
    return all(_is_aten(n, "view_as_real") for n in readers) and not any(
        out == o.name for o in g.origin_graph.outputs)


@ts_mapping("stft")
def stft(node: OriginNode, g: MapContext) -> Any:
    a = Args(node, g)
    x = a.tensor(0, "input")
    n_fft = a.int(1, what="n_fft")
    hop = a.int(2, None, what="hop_length") or n_fft // 4
    win = a.int(3, None, what="win_length") or n_fft
    normalized, onesided = bool(a.py(5, False)), a.py(6, None)
    return_complex = a.py(7, None)
    if a.py(8, None):
        raise g.unsupported("align_to_window=True is not supported",
                            hint="leave align_to_window unset (its default)")
    if len(x.shape) not in (1, 2) or x.dtype not in ("f32", "f64"):
        raise g.unsupported(f"input of shape {list(x.shape)} ({x.dtype}): only real float "
                            "signals [L] or [B, L] are supported", hint="pass a real signal")
    if not 0 < win <= n_fft or hop < 1:
        raise g.error(f"win_length {win}, n_fft {n_fft}, hop_length {hop}: they need "
                      "0 < win_length <= n_fft and hop_length >= 1")
    if return_complex and not _complex_readers_ok(node, g):
        raise g.unsupported("a complex STFT result read by anything but torch.view_as_real",
                            hint="wrap the result in torch.view_as_real(...) (the IR has no "
                                 "complex dtype)")
    batched = x if len(x.shape) == 2 else g.op("Unsqueeze", [x], axes=[0])
    signal = g.op("Unsqueeze", [batched], axes=[2])
    y = g.op("STFT", [signal, _window(g, a, n_fft, win, x.dtype)], frame_step=hop,
             frame_length=n_fft, onesided=1 if onesided is None else int(bool(onesided)))
    if normalized:
        y = g.op("Mul", [y, g.constant(np.array(n_fft ** -0.5, to_numpy_dtype(x.dtype)))])
    y = g.op("Transpose", [y], perm=[0, 2, 1, 3])  # [B, bins, frames, 2], torch's order
    return y if len(x.shape) == 2 else g.op("Squeeze", [y], axes=[0])


@ts_mapping("view_as_real")
def view_as_real(node: OriginNode, g: MapContext) -> Any:
    src = node.inputs[0]
    maker = next((n for n in g.origin_graph.nodes if src in n.outputs), None)
    if maker is None or not _is_aten(maker, "stft"):
        raise g.unsupported("view_as_real of a tensor that is not a torch.stft result: the IR "
                            "has no complex dtype", hint="keep complex tensors out of the model")
    return g.op("Identity", [Args(node, g).tensor(0)])
