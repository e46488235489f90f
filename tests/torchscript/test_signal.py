"""torch.stft through the TorchScript path against torch (as torch.view_as_real of the complex
result, or return_complex=False): onesided or not, window shorter than n_fft, no window,
normalized, centred (torch's own reflect pad), 1-D and batched signals; the simulator against
the interpreter; a complex result read by another op is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import requires_torch

from .helpers import check

pytestmark = requires_torch

CASES = {
    # id: (signal shape, stft keyword arguments; "window" names a torch window of win_length)
    "hann,onesided": ((2, 64), {"n_fft": 16, "hop_length": 4, "window": "hann"}),
    "hann,twosided": ((2, 48), {"n_fft": 8, "hop_length": 3, "window": "hann", "onesided": False}),
    "win_length<n_fft": ((3, 50), {"n_fft": 16, "hop_length": 5, "win_length": 10, "window": "hann"}),
    "window=absent,hop=absent": ((2, 40), {"n_fft": 8}),
    "normalized": ((2, 32), {"n_fft": 8, "hop_length": 2, "window": "hann", "normalized": True}),
    "rank1": ((37,), {"n_fft": 12, "hop_length": 5, "window": "hann"}),
    "center": ((2, 40), {"n_fft": 8, "hop_length": 4, "window": "hann", "center": True}),
}


def _module(shape: tuple[int, ...], kw: dict[str, Any]) -> Any:
    import torch

    kw = dict(kw)
    kw.setdefault("center", False)
    if kw.get("window") == "hann":
        kw["window"] = torch.hann_window(kw.get("win_length") or kw["n_fft"])

    class Stft(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.view_as_real(torch.stft(x, return_complex=True, **kw)) * 1.0

    return Stft()


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_stft_matches_torch(case: str) -> None:
    import torch

    shape, kw = CASES[case]
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    g = check(_module(shape, kw), x)
    assert any(n.op == "STFT" for n in g.nodes)


@pytest.mark.parametrize("shape", [(2, 40), (37,)], ids=["batched", "rank1"])
def test_scripted_stft_centred_matches_torch(shape: tuple[int, ...]) -> None:
    """torch.jit.script keeps torch.stft's Python pad for ``center=True``: it views the padded
    signal back through ``input.shape[-signal_dim:]``, an aten::slice of a List[int]."""
    import torch

    class Stft(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("window", torch.hann_window(8))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.stft(x, 8, hop_length=3, window=self.window, center=True, return_complex=True)
            return torch.view_as_real(y) * 1.0

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(5))
    g = check(Stft(), x, mode="script")
    assert any(n.op == "STFT" for n in g.nodes) and any(n.op == "Pad" for n in g.nodes)


def test_stft_simulator_matches_interpreter() -> None:
    import torch

    import opbridge as ob

    shape, kw = CASES["win_length<n_fft"]
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2))
    g = check(_module(shape, kw), x)
    feeds = {g.inputs[0].name: x.numpy()}
    want = np.asarray(ob.interpret(g, feeds)[g.outputs[0].name])
    got = ob.compile(g, target="bm1684").run(feeds)[g.outputs[0].name]
    np.testing.assert_array_equal(got, want)


def test_complex_result_read_by_another_op_is_refused(tmp_path: Path) -> None:
    import torch

    import opbridge as ob
    from opbridge.export.torchscript import export_torchscript

    class Mag(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.stft(x, 8, hop_length=2, return_complex=True, center=False).abs()

    path = export_torchscript(Mag().eval(), (torch.randn(2, 32),), tmp_path / "m.ts.json")
    with pytest.raises(ob.UnsupportedOpError, match=r"\(stft\): a complex STFT result read by anything but torch.view_as_real") as err:
        ob.convert(str(path))
    assert "view_as_real" in err.value.hint


def test_stft_return_complex_false_matches_torch() -> None:
    """The deprecated real form: [B, bins, frames, 2] straight from aten::stft."""
    import warnings

    import torch

    window = torch.hann_window(8)

    class RealStft(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.stft(x, 8, hop_length=3, window=window, center=False, return_complex=False)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = check(RealStft(), torch.randn(2, 30, generator=torch.Generator().manual_seed(3)))
    assert any(n.op == "STFT" for n in g.nodes)
