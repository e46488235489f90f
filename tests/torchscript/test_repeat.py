"""aten::repeat_interleave (its three overloads) vs torch, and its refusal of run-time counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from opbridge.errors import UnsupportedOpError
from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _cases() -> dict[str, Any]:
    import torch

    return {
        "int,dim=absent": lambda x: x.repeat_interleave(2),
        "int,dim=1": lambda x: torch.repeat_interleave(x, 3, dim=1),
        "int,dim=-1": lambda x: x.repeat_interleave(2, dim=-1),
        "int=0": lambda x: x.repeat_interleave(0, dim=0),
        "tensor,dim=1": lambda x: x.repeat_interleave(torch.tensor([1, 0, 2]), dim=1),
        "tensor-1,dim=2": lambda x: x.repeat_interleave(torch.tensor([2]), dim=2),
        "tensor,dim=absent": lambda x: x[0, 0].repeat_interleave(torch.tensor([1, 2, 0, 3])),
        "output_size": lambda x: x.repeat_interleave(2, dim=0, output_size=4),
        "0-d": lambda x: x[0, 0, 0].repeat_interleave(3),
    }


@pytest.mark.parametrize("case", list(_cases()) if HAVE_TORCH else [])
def test_repeat_interleave(case: str) -> None:
    import torch

    torch.manual_seed(3)
    check(_cases()[case], torch.randn(2, 3, 4))


def _buffer_module() -> Any:
    import torch

    class M(torch.nn.Module):
        """Counts in a buffer, scripted: the .self_Tensor and .Tensor overloads stay in the graph."""

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("counts", torch.tensor([2, 0, 1]))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            idx = torch.repeat_interleave(self.counts)
            return x.repeat_interleave(self.counts, dim=1), x.index_select(1, idx)

    return M()


def test_repeat_interleave_scripted_tensor_counts() -> None:
    import torch

    torch.manual_seed(4)
    check(_buffer_module(), torch.randn(2, 3), mode="script")


def test_repeat_interleave_runtime_counts_refused(export: Any) -> None:
    import torch

    import opbridge as ob

    path: Path = export(lambda x, r: x.repeat_interleave(r, dim=0),
                        (torch.randn(3, 2), torch.tensor([1, 2, 0])))
    with pytest.raises(UnsupportedOpError, match=r"\(repeat_interleave\): repeats \(input 'r'\) "
                                                 r"is computed at run time"):
        ob.convert(str(path))
