"""Export a module, convert the file (no torch in the conversion itself), compare with torch;
every converted graph must also come back equal from a ``.obir`` file."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..graph_equality import assert_roundtrip

RTOL = 1e-4


def to_tuple(x: Any) -> tuple[Any, ...]:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def export_and_convert(module: Any, inputs: tuple[Any, ...], mode: str = "trace") -> Any:
    """(IR graph, torch outputs as numpy) for ``module`` on ``inputs``."""
    import torch

    from opbridge.convert import convert
    from opbridge.export.torchscript import export_torchscript

    if isinstance(module, torch.nn.Module):
        module = module.eval()
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = export_torchscript(module, inputs, Path(d) / "m.ts.json", mode=mode)
        graph = convert(str(path))
        assert_roundtrip(graph, d)
    with torch.no_grad():
        ref = [t.detach().numpy() for t in _flatten(module(*inputs))]
    return graph, ref


def _flatten(obj: Any) -> list[Any]:
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _flatten(o)]
    return [obj]


def assert_close(got: np.ndarray, ref: np.ndarray, rtol: float = RTOL, what: str = "") -> float:
    """Compare like torch.testing: |got - ref| <= atol + rtol * |ref|; returns the max rel error."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != torch {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != torch {ref.dtype}"
    if ref.dtype == np.bool_ or ref.dtype.kind in "iu":
        np.testing.assert_array_equal(got, ref, err_msg=what)
        return 0.0
    g64, r64 = got.astype(np.float64), ref.astype(np.float64)
    finite = np.isfinite(r64)
    # the scale of the finite values: an inf in the reference must not make atol infinite
    scale = max(float(np.abs(r64[finite]).max()) if finite.any() else 0.0, 1e-6)
    np.testing.assert_allclose(g64, r64, rtol=rtol, atol=rtol * scale * 1e-2 + 1e-6, err_msg=what)
    err = np.abs(g64 - r64)[finite]
    return float((err / np.maximum(np.abs(r64[finite]), 1e-6 * scale)).max()) if err.size else 0.0


def check(module: Any, *inputs: Any, rtol: float = RTOL, mode: str = "trace") -> Any:
    """Export ``module`` (a module or a function of tensors), convert, run the IR interpreter
    and compare every output with torch's. Returns the IR graph."""
    import torch

    import opbridge as ob

    if not isinstance(module, torch.nn.Module):
        module = _Wrap(module)
    graph, ref = export_and_convert(module, inputs, mode)
    # a scripted forward()'s int / float / bool argument is a 0-d graph input of its dtype
    feeds = {v.name: t.numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
             for v, t in zip(graph.inputs, inputs)}
    out = list(ob.interpret(graph, feeds).values())
    assert len(out) == len(ref), f"{len(out)} outputs, torch gives {len(ref)}"
    for i, (o, r) in enumerate(zip(out, ref)):
        assert_close(np.asarray(o), r, rtol, what=f"output {i}")
    return graph


def _wrap_class() -> Any:
    import torch

    class Wrap(torch.nn.Module):
        def __init__(self, fn: Any) -> None:
            super().__init__()
            self.fn = fn

        def forward(self, *xs: Any) -> Any:
            return self.fn(*xs)

    return Wrap


def _Wrap(fn: Any) -> Any:  # noqa: N802 - reads as a class at the call site
    return _wrap_class()(fn)
