"""linear/matmul/mm/bmm/addmm/baddbmm/einsum and scaled_dot_product_attention vs torch."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _cases() -> dict[str, tuple[Any, list[tuple[int, ...]]]]:
    import torch
    import torch.nn.functional as F  # noqa: N812
    from torch import nn

    sdpa = F.scaled_dot_product_attention
    return {
        "linear=2d": (nn.Linear(6, 4), [(3, 6)]),
        "linear=3d": (nn.Linear(6, 4), [(2, 3, 6)]),
        "linear=no-bias": (nn.Linear(6, 4, bias=False), [(2, 3, 6)]),
        "matmul=2dx2d": (torch.matmul, [(3, 5), (5, 4)]),
        "matmul=batched-broadcast": (torch.matmul, [(2, 3, 5), (5, 4)]),
        "mm": (torch.mm, [(3, 5), (5, 4)]),
        "bmm": (torch.bmm, [(2, 3, 5), (2, 5, 4)]),
        "addmm=absent": (lambda c, a, b: torch.addmm(c, a, b), [(3, 4), (3, 5), (5, 4)]),
        "addmm=alpha,beta": (lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
                             [(4,), (3, 5), (5, 4)]),
        "baddbmm": (lambda c, a, b: torch.baddbmm(c, a, b, alpha=0.5), [(2, 3, 4), (2, 3, 5), (2, 5, 4)]),
        "einsum": (lambda a, b: torch.einsum("bij,bjk->bik", a, b), [(2, 3, 5), (2, 5, 4)]),
        "sdpa=absent": (lambda q, k, v: sdpa(q, k, v), [(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4)]),
        "sdpa=causal": (lambda q, k, v: sdpa(q, k, v, is_causal=True), [(2, 3, 5, 8)] * 3),
        "sdpa=scale": (lambda q, k, v: sdpa(q, k, v, scale=0.3), [(1, 2, 5, 8)] * 3),
        "sdpa=float-mask": (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), [(1, 2, 5, 8)] * 3 + [(5, 5)]),
        "sdpa=bool-mask": (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m > -1.0), [(1, 2, 5, 8)] * 3 + [(5, 5)]),
        "multihead-attention": (_mha(), [(2, 5, 8)]),
    }


def _mha() -> Any:
    import torch

    class MHA(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.attn(x, x, x, need_weights=False)[0]

    return MHA()


@pytest.mark.parametrize("case", list(_cases()) if HAVE_TORCH else [])
def test_matmul(case: str) -> None:
    import torch

    torch.manual_seed(5)
    fn, shapes = _cases()[case]
    check(fn, *[torch.randn(*s) for s in shapes])
