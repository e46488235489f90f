"""view/reshape/flatten/unflatten/permute/transpose/squeeze/unsqueeze/expand/repeat vs torch."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _cases() -> dict[str, Any]:
    import torch

    return {
        "view=-1": lambda x: x.view(-1, 6),
        "view=from-size": lambda x: x.view(x.size(0), -1),
        "reshape": lambda x: x.reshape(4, 3, 2),
        "reshape=same": lambda x: x.reshape(2, 3, 4),
        "flatten=absent": lambda x: torch.flatten(x),
        "flatten=1": lambda x: torch.flatten(x, 1),
        "flatten=0,1": lambda x: x.flatten(0, 1),
        "unflatten": lambda x: x.unflatten(2, (2, 2)),
        "unflatten=-1": lambda x: x.unflatten(-1, (-1, 2)),
        "view_as": lambda x: x.view_as(x.transpose(0, 1).contiguous()),
        "permute": lambda x: x.permute(2, 0, 1),
        "permute=negative": lambda x: x.permute(-1, -3, -2),
        "transpose": lambda x: x.transpose(0, 2),
        "t": lambda x: x[0].t(),
        "contiguous": lambda x: x.transpose(1, 2).contiguous(),
        "squeeze=absent": lambda x: x.unsqueeze(1).unsqueeze(-1).squeeze(),
        "squeeze=dim": lambda x: x.unsqueeze(1).squeeze(1),
        "squeeze=dim-not-1": lambda x: x.squeeze(0),
        "unsqueeze=0": lambda x: x.unsqueeze(0),
        "unsqueeze=-1": lambda x: x.unsqueeze(-1),
        "expand": lambda x: x[:, :1].expand(2, 5, 4),
        "expand=-1,new-dim": lambda x: x[:, :1].expand(3, -1, 2, -1),
        "expand_as": lambda x: x[:1].expand_as(x),
        "repeat": lambda x: x.repeat(1, 2, 1),
        "repeat=more-dims": lambda x: x.repeat(2, 1, 1, 3),
        "clone,detach": lambda x: x.clone().detach() + 1,
        "dropout=eval": torch.nn.Dropout(0.5),
    }


@pytest.mark.parametrize("case", list(_cases()) if HAVE_TORCH else [])
def test_shape(case: str) -> None:
    import torch

    torch.manual_seed(6)
    check(_cases()[case], torch.randn(2, 3, 4))
