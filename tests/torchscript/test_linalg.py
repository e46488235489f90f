"""torch.linalg.det and torch.det (traced and scripted) against torch."""

from __future__ import annotations

import pytest

from tests.conftest import requires_torch

from .helpers import check

pytestmark = requires_torch


def _module(fn: str):  # noqa: ANN202 - a torch.nn.Module, imported lazily
    import torch

    class LinalgDet(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.linalg.det(x) * 2

    class Det(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.det(x) + 1

    return LinalgDet() if fn == "linalg.det" else Det()


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5)], ids=["2d", "batch"])
@pytest.mark.parametrize("fn", ["linalg.det", "det"])
@pytest.mark.parametrize("mode", ["trace", "script"])
def test_det_matches_torch(fn: str, mode: str, shape: tuple[int, ...]) -> None:
    import torch

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    g = check(_module(fn), x, mode=mode)
    assert any(n.op == "Det" for n in g.nodes)
