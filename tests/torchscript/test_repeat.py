"""aten::repeat_interleave (its three overloads) vs torch, its refusal of run-time counts, and
that one count for all is a broadcast (no constant as large as the output)."""

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
        "int,dim=-3": lambda x: x.repeat_interleave(2, dim=-3),
        "int,dim=2": lambda x: x.repeat_interleave(3, dim=2),
        "int=1,dim=1": lambda x: x.repeat_interleave(1, dim=1),
        "int=1,dim=absent": lambda x: x.repeat_interleave(1),
        "tensor-equal,dim=1": lambda x: x.repeat_interleave(torch.tensor([2, 2, 2]), dim=1),
    }


@pytest.mark.parametrize("case", list(_cases()) if HAVE_TORCH else [])
def test_repeat_interleave(case: str) -> None:
    import torch

    torch.manual_seed(3)
    check(_cases()[case], torch.randn(2, 3, 4))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, -2], ids=lambda d: f"dim={'absent' if d is None else d}")
def test_repeat_interleave_single_count_dtypes(dtype: str, dim: int | None) -> None:
    """A single count on every dtype and dim: shape, dtype and values as torch's."""
    import torch

    torch.manual_seed(5)
    x = (torch.randn(2, 3, 4) * 4).to(getattr(torch, dtype))
    check(lambda t: t.repeat_interleave(3, dim=dim), x)


@pytest.mark.parametrize("dim", [None, 1], ids=["dim=absent", "dim=1"])
def test_repeat_interleave_single_count_holds_no_output_sized_constant(dim: int | None) -> None:
    """1M elements repeated 2 times: the graph holds no constant beyond a few shape entries
    (an index per output element was 16 MB of int64 here), and the values are torch's."""
    import torch

    torch.manual_seed(6)
    graph = check(lambda t: t.repeat_interleave(2, dim=dim), torch.randn(2, 1024, 512))
    sizes = {name: c.data.size for name, c in graph.constants.items()}
    assert all(n <= 8 for n in sizes.values()), f"constants (name: elements): {sizes}"
    assert "Gather" not in graph.op_counts()


def test_repeat_interleave_per_element_counts_keep_the_gather() -> None:
    import torch

    graph = check(lambda t: t.repeat_interleave(torch.tensor([1, 0, 2]), dim=1), torch.randn(2, 3))
    assert graph.op_counts().get("Gather") == 1


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
