"""mean/sum/prod/amax/amin/max/min/argmax/argmin/logsumexp/var/std with dims and keepdim, vs torch."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _cases() -> dict[str, Any]:
    import torch

    return {
        "mean=all": lambda x: x.mean(),
        "mean=dims": lambda x: x.mean(dim=(1, 2)),
        "mean=keepdim": lambda x: x.mean(-1, keepdim=True),
        "sum=all": lambda x: x.sum(),
        "sum=dim": lambda x: x.sum(1),
        "sum=bool": lambda x: (x > 0).sum(-1),
        "prod=dim": lambda x: x.prod(1),
        "amax": lambda x: x.amax(dim=(0, 2)),
        "amin=keepdim": lambda x: x.amin(-1, keepdim=True),
        "max=all": lambda x: x.max(),
        "max=dim": lambda x: x.max(dim=1),
        "max=dim,values": lambda x: x.max(dim=1, keepdim=True)[0],
        "min=dim": lambda x: torch.min(x, -1),
        "argmax=dim": lambda x: x.argmax(-1),
        "argmax=None": lambda x: x.argmax(),
        "argmin=keepdim": lambda x: x.argmin(1, keepdim=True),
        "logsumexp": lambda x: torch.logsumexp(x, dim=1),
        "var=absent": lambda x: x.var(),
        "var=dim,unbiased": lambda x: x.var(dim=2, keepdim=True),
        "var=biased": lambda x: x.var(dim=1, unbiased=False),
        "std=dim": lambda x: x.std(dim=-1),
        "std=correction0": lambda x: torch.std(x, dim=(1, 2), correction=0),
    }


@pytest.mark.parametrize("case", list(_cases()) if HAVE_TORCH else [])
def test_reduce(case: str) -> None:
    import torch

    torch.manual_seed(9)
    check(_cases()[case], torch.randn(2, 4, 5))
