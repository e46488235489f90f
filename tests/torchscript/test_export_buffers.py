"""Buffers that forward() writes into, in submodules: exported as they were before export, every
read of one buffer being the same tensor, and the user's module left unchanged by the export."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import requires_torch

from .helpers import check

pytestmark = requires_torch


def _module() -> Any:
    import torch

    class Counter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("state", torch.arange(3, dtype=torch.float32))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.state.mul_(2.0)
            self.state[0] = 5.0
            return x + self.state

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = torch.nn.Sequential(torch.nn.Identity(), Counter())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x) * 2.0

    return Net()


@pytest.mark.parametrize("mode", ["trace", "script"])
def test_written_submodule_buffer_matches_torch(mode: str) -> None:
    import torch

    torch.manual_seed(3)
    x = torch.randn(2, 3)
    module = _module()
    # check() runs torch on the same module after exporting it: the export must not have
    # run the buffer writes into it (the reference would then start from state * 2)
    check(module, x, mode=mode)
    assert module.inner[1].state.tolist() == [5.0, 2.0, 4.0]  # torch's one reference run


def test_export_leaves_the_module_unchanged(export: Any) -> None:
    import torch

    module = _module()
    export(module, torch.randn(2, 3))
    assert module.inner[1].state.tolist() == [0.0, 1.0, 2.0]
