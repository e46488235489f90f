"""cat/stack/chunk/split/unbind, slicing/select/narrow, indexing, gather, embedding, pad, topk,
cumsum, diff, triu/tril, pixel (un)shuffle, channel shuffle, flip — vs torch."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _cases() -> dict[str, Any]:
    import torch
    import torch.nn.functional as F  # noqa: N812

    idx = torch.tensor([2, 0, 3])
    return {
        "cat=dim1": lambda x: torch.cat([x, x * 2], dim=1),
        "cat=dim-1": lambda x: torch.cat([x, x[..., :2]], -1),
        "stack=absent": lambda x: torch.stack([x, x + 1]),
        "stack=dim-1": lambda x: torch.stack([x, x + 1], dim=-1),
        "chunk=even": lambda x: torch.chunk(x, 2, dim=1)[1] * 1,
        "chunk=uneven": lambda x: sum(t.sum(-1, keepdim=True) for t in x.chunk(3, dim=-1)),
        "chunk=unpacked": lambda x: (lambda a, b: a - b)(*x.chunk(2, 1)),
        "split=int": lambda x: (lambda a, b, c: torch.cat([c, a], -1))(*x.split(2, dim=-1)),
        "split=sizes": lambda x: (lambda a, b: a.sum() + b)(*x.split([1, 3], dim=1)),
        "unbind": lambda x: (lambda a, b: a * b)(*x.unbind(0)),
        "slice=1:3": lambda x: x[:, 1:3],
        "slice=step": lambda x: x[..., ::2],
        "slice=negative": lambda x: x[:, -2:],
        "slice=full": lambda x: x[:, :] + 1,
        "select": lambda x: x[:, 1],
        "select=negative": lambda x: x[..., -1],
        "narrow": lambda x: x.narrow(2, 1, 3),
        "index=tensor": lambda x: x[:, idx],
        "index=leading": lambda x: x[idx[:2] % 2],
        "index_select": lambda x: torch.index_select(x, 2, idx),
        "gather": lambda x: torch.gather(x, 2, x.argsort(-1)),
        "sort": lambda x: torch.sort(x, dim=1, descending=True),
        "pad=constant": lambda x: F.pad(x, [1, 2]),
        "pad=constant,value,2d": lambda x: F.pad(x, [1, 0, 0, 2], value=-1.5),
        "pad=reflect": lambda x: F.pad(x.unsqueeze(0), [1, 1, 2, 0], mode="reflect"),
        "pad=replicate": lambda x: F.pad(x, [2, 1], mode="replicate"),
        "pad=circular": lambda x: F.pad(x, [1, 2], mode="circular"),
        "zero_pad2d": torch.nn.ZeroPad2d((1, 1, 0, 1)),
        "constant_pad_nd": lambda x: torch.constant_pad_nd(x, [1, 2, 0, 1], 0.5),
        "reflection_pad1d": lambda x: torch._C._nn.reflection_pad1d(x, [2, 1]),
        "reflection_pad2d": lambda x: torch._C._nn.reflection_pad2d(x.unsqueeze(0), [1, 2, 1, 0]),
        "replication_pad1d": lambda x: torch._C._nn.replication_pad1d(x, [2, 1]),
        "replication_pad2d": lambda x: torch._C._nn.replication_pad2d(x.unsqueeze(0), [1, 2, 1, 0]),
        "topk=values": lambda x: torch.topk(x, 2)[0],
        "topk=both,smallest": lambda x: torch.topk(x, 3, dim=1, largest=False),
        "cumsum": lambda x: torch.cumsum(x, dim=2),
        "diff": lambda x: torch.diff(x),
        "diff=n2,dim1,prepend,append": lambda x: torch.diff(x, n=2, dim=1, prepend=x[:, :1] - 1,
                                                            append=x[:, -2:] * 3),
        # transformers' packed-sequence check: diff of int positions with a prepended column
        "diff=int,prepend": lambda x: torch.diff((x * 4).long(), prepend=(x[..., :1] * 4).long() - 1),
        "diff=bool": lambda x: torch.diff(x > 0, dim=0).int(),
        "triu": lambda x: torch.triu(x),
        "tril=k": lambda x: torch.tril(x, -1),
        "flip": lambda x: torch.flip(x, [0, 2]),
        "meshgrid=ij": lambda x: (lambda a, b: a * x[0, :3, :2] + b)(
            *torch.meshgrid(torch.arange(x.size(1) - 1), torch.arange(2), indexing="ij")),
        "meshgrid=xy": lambda x: (lambda a, b: a * x[0, :2, :3] + b)(
            *torch.meshgrid(torch.arange(x.size(1) - 1), torch.arange(2), indexing="xy")),
    }


@pytest.mark.parametrize("case", list(_cases()) if HAVE_TORCH else [])
def test_tensor(case: str) -> None:
    import torch

    torch.manual_seed(7)
    check(_cases()[case], torch.randn(2, 4, 5))


def test_embedding() -> None:
    import torch

    emb = torch.nn.Embedding(10, 4)
    check(emb, torch.tensor([[1, 2, 9], [0, 0, 3]]))


@pytest.mark.parametrize("case", ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle"])
def test_shuffles(case: str) -> None:
    import torch

    torch.manual_seed(8)
    mod = {"pixel_shuffle": torch.nn.PixelShuffle(2), "pixel_unshuffle": torch.nn.PixelUnshuffle(2),
           "channel_shuffle": torch.nn.ChannelShuffle(2)}[case]
    check(mod, torch.randn(1, 8, 4, 6))
