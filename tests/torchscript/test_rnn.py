"""aten::gru and aten::gru_cell against torch.nn.GRU (traced and scripted) and GRUCell (traced)."""

from __future__ import annotations

from typing import Any

import pytest

from .helpers import check

torch = pytest.importorskip("torch", reason="torch is the reference for these tests")


class _Gru(torch.nn.Module):
    def __init__(self, **kw: Any) -> None:
        super().__init__()
        self.gru = torch.nn.GRU(6, 5, **kw)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, h = self.gru(x)
        return y, h


class _GruWithState(_Gru):
    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, h = self.gru(x, h0)
        return y, h


CASES = {
    "default": {},
    "bias=False": {"bias": False},
    "num_layers=2": {"num_layers": 2},
    "bidirectional": {"bidirectional": True},
    "bidirectional,num_layers=2": {"bidirectional": True, "num_layers": 2},
    "batch_first": {"batch_first": True},
}


@pytest.mark.parametrize("mode", ["trace", "script"])
@pytest.mark.parametrize("kw", list(CASES.values()), ids=list(CASES))
def test_gru_matches_torch(kw: dict[str, Any], mode: str) -> None:
    torch.manual_seed(0)
    check(_Gru(**kw), torch.randn(4, 3, 6), mode=mode)


def test_gru_with_initial_state() -> None:
    torch.manual_seed(1)
    m = _GruWithState(num_layers=2, bidirectional=True)
    check(m, torch.randn(3, 2, 6), torch.randn(4, 2, 5), mode="script")


@pytest.mark.parametrize("bias", [True, False], ids=["bias=True", "bias=False"])
def test_gru_cell_matches_torch(bias: bool) -> None:
    torch.manual_seed(2)
    cell = torch.nn.GRUCell(6, 5, bias=bias)
    check(cell, torch.randn(3, 6), torch.randn(3, 5))


class _CellCall(torch.nn.Module):
    """torch.gru_cell called directly (a scripted GRUCell's forward also checks its inputs)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = torch.nn.GRUCell(6, 5)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        c = self.cell
        return torch.gru_cell(x, h, c.weight_ih, c.weight_hh, c.bias_ih, c.bias_hh)


def test_scripted_gru_cell_call_matches_torch() -> None:
    torch.manual_seed(3)
    check(_CellCall(), torch.randn(3, 6), torch.randn(3, 5), mode="script")
