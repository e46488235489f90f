"""Writes through views: every read after a write sees it — the base, the written view, and other
views of the same base made before the write. torch runs each function as the reference."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _cases() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    import torch

    def fill_slice(x: Any) -> Any:
        y = x.clone()
        y[:, 1:3] = 0.5
        return y

    def fill_slice_of_slice(x: Any) -> Any:  # Swin's shifted-window mask, built by writes
        m = x.new_zeros((6, 6))
        count = 0
        for h in ((0, -3), (-3, -1), (-1, None)):
            for w in ((0, -3), (-3, -1), (-1, None)):
                m[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        return x + m

    def earlier_view_sees_write(x: Any) -> Any:
        y = x.clone()
        col = y[:, 1]          # made before the write, overlaps it
        row = y[0]
        row.fill_(2.0)
        return col * 1.0, y

    def copy_into_select(x: Any, z: Any) -> Any:
        y = x * 1.0
        y[:, 0] = z
        return y

    def copy_broadcast_cast(x: Any) -> Any:
        y = x.clone()
        y[1:, :2].copy_(torch.arange(2, dtype=torch.int64))
        return y

    def root_write_after_read(x: Any) -> Any:
        y = x * 1.0
        before = y + 1.0       # reads y before the write
        y.add_(1.0)
        y.mul_(2.0)
        return before, y

    def view_chain(x: Any) -> Any:
        y = x.clone()
        y.view(-1)[::3] = -1.0
        y.permute(1, 0)[0].mul_(3.0)
        y.transpose(0, 1).unsqueeze(0)[0, 2, 1:].zero_()
        return y

    def stale_view_after_base_write(x: Any) -> Any:
        y = x.clone()
        part = y[0:2]
        y.mul_(2.0)
        part.add_(1.0)         # writes the doubled values
        return part * 1.0, y

    def relu_on_slice(x: Any) -> Any:
        y = x.clone()
        y[:, 1:].relu_()
        return y

    def masked_fill_slice(x: Any) -> Any:
        y = x.clone()
        y[:, :2].masked_fill_(y[:, :2] > 0, 0.0)
        return y

    def bool_mask_write(x: Any) -> Any:
        y = x.clone()
        y[y > 0.5] = 0.0
        return y

    def const_index_put(x: Any) -> Any:
        y = x.clone()
        y[torch.tensor([0, 2])] = 1.0
        y[:, torch.tensor([1, 3])] = x[:, :2] * 10
        return y

    def run_time_index_put(x: Any, idx: Any) -> Any:
        y = x.clone()
        y[idx] = -5.0
        return y

    def accumulate(x: Any, idx: Any) -> Any:
        y = x.clone()
        return y.index_put_((idx,), torch.ones(3, 5), accumulate=True)

    def write_graph_input(x: Any) -> Any:
        x[0, 0] = 7.0
        return x * 1.0

    def write_returned_twice(x: Any) -> Any:
        y = x.clone()
        a = y.add_(1.0)
        y[0] = 0.0
        return a * 1.0, y

    def bool_or_inplace(x: Any) -> Any:
        m = x > 0.5
        m |= x < -0.5
        return torch.where(m, x, torch.zeros_like(x))

    x = torch.randn(4, 5)
    idx = torch.tensor([2, 0, 2])
    return {
        "fill_slice": (fill_slice, (x,)),
        "fill_slice_of_slice": (fill_slice_of_slice, (torch.randn(6, 6),)),
        "earlier_view_sees_write": (earlier_view_sees_write, (x,)),
        "copy_into_select": (copy_into_select, (x, torch.randn(4))),
        "copy_broadcast_cast": (copy_broadcast_cast, (x,)),
        "root_write_after_read": (root_write_after_read, (x,)),
        "view_chain": (view_chain, (x,)),
        "stale_view_after_base_write": (stale_view_after_base_write, (x,)),
        "relu_on_slice": (relu_on_slice, (x,)),
        "masked_fill_slice": (masked_fill_slice, (x,)),
        "bool_mask_write": (bool_mask_write, (x,)),
        "const_index_put": (const_index_put, (x,)),
        "run_time_index_put": (run_time_index_put, (x, idx[:2])),
        "accumulate": (accumulate, (x, idx)),
        "write_graph_input": (write_graph_input, (x,)),
        "write_returned_twice": (write_returned_twice, (x,)),
        "bool_or_inplace": (bool_or_inplace, (x,)),
    }


_NAMES = list(_cases()) if HAVE_TORCH else []


@pytest.mark.parametrize("name", _NAMES)
def test_write_through_view_matches_torch(name: str) -> None:
    fn, inputs = _cases()[name]
    # each input is cloned for torch's own run: the function may write into its input
    check(lambda *xs: fn(*(t.clone() for t in xs)), *inputs)


def test_write_in_a_scripted_function() -> None:
    import torch

    class Writes(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            y[1:3] = y[0:2] * 2.0
            y[:, -1].fill_(0.0)
            return y

    check(Writes(), torch.randn(4, 3), mode="script")


@pytest.mark.parametrize("shifts,dims", [(2, 0), (-1, 1), ((1, -2), (0, 2)), (3, None),
                                         ((7, 0), (1, 2)), ((2, 1), (-1, -1))])
def test_roll(shifts: Any, dims: Any) -> None:
    import torch

    x = torch.randn(2, 3, 4)
    check(lambda t: torch.roll(t, shifts, dims) if dims is not None else torch.roll(t, shifts), x)


def test_scatter_kinds() -> None:
    import torch

    idx = torch.tensor([[0, 2, 1], [2, 0, 0]])

    def fn(x: Any, src: Any, part: Any) -> Any:
        a = x.scatter(1, idx, src)
        b = x.clone().scatter_(0, idx[:, :2], 0.25)
        c = x.scatter_add(1, idx, src)
        d = torch.slice_scatter(x, part, dim=1, start=1, step=2)
        e = torch.select_scatter(x, part[:, 0], dim=1, index=-1)
        return a, b, c, d, e

    check(fn, torch.randn(3, 4), torch.randn(2, 3), torch.randn(3, 2))


def test_write_into_a_chunk_then_reading_the_base_is_refused() -> None:
    import torch

    from opbridge.errors import UnsupportedOpError

    def fn(x: Any) -> Any:
        y = x.clone()
        a, b = y.chunk(2)
        a.add_(1.0)
        return a + b, y * 1.0

    with pytest.raises(UnsupportedOpError, match=r"read after node .*add_.* piece of it"):
        check(fn, torch.randn(4, 3))


def test_write_into_a_chunk_read_through_the_pieces_only() -> None:
    import torch

    def fn(x: Any) -> Any:
        a, b = (x * 1.0).chunk(2)
        a.add_(1.0)
        return a + b

    check(fn, torch.randn(4, 3))


def test_matmul_accumulated_into_a_slice() -> None:
    import torch

    def fn(x: Any, a: Any, b: Any, c: Any) -> Any:
        y = x.clone()
        y[1:3].addmm_(a, b, beta=0.5, alpha=2.0)
        z = x.clone().unsqueeze(0)
        z.baddbmm_(c[None], b[None])
        w = x.clone()
        w[:, 1:].addbmm_(c[None], b[None, :, :4])
        return y, z, w

    torch.manual_seed(9)
    check(fn, torch.randn(4, 5), torch.randn(2, 3), torch.randn(3, 5), torch.randn(4, 3))


def test_write_into_an_unbind_item_then_reading_the_base_is_refused() -> None:
    import torch

    from opbridge.errors import UnsupportedOpError

    class Items(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            rows = y.unbind(0)
            rows[1].mul_(2.0)
            return y + 1.0

    with pytest.raises(UnsupportedOpError, match=r"piece of it"):
        check(Items(), torch.randn(3, 4), mode="script")


def test_index_writes() -> None:
    import torch

    idx = torch.tensor([3, 0])

    def fn(x: Any, src: Any, pos: Any) -> Any:
        cache = torch.zeros(1, 2, 6, 4)
        cache.index_copy_(2, pos, src)               # transformers' StaticCache update
        a = x.index_add(0, idx, src[0, 0, :, :3].expand(2, 3), alpha=0.5)
        b = x.clone()
        b[1:].index_fill_(1, torch.tensor([2]), -1.0)
        return cache * 1.0, a, b

    check(fn, torch.randn(5, 3), torch.randn(1, 2, 2, 4), torch.tensor([4, 1]))


def test_pointwise_three_operand_kinds() -> None:
    import torch

    def fn(x: Any, t1: Any, t2: Any) -> Any:
        y = x.clone()
        y[:, :2].addcmul_(t1[:, :2], t2[:, :2], value=0.5)
        z = torch.addcdiv(x, t1, t2.abs() + 1.0, value=-2.0)
        w = x.clone()
        w.lerp_(t1, 0.25)
        return y, z, w, torch.lerp(x, t1, t2.sigmoid())

    check(fn, torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4))
