"""aten::im2col (F.unfold / nn.Unfold) vs torch: kernel, dilation, padding and stride, one image
or a batch, and unfold followed by fold (aten::col2im) as RAFT's convex upsampling uses it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _cases() -> dict[str, Any]:
    import torch.nn.functional as F

    return {
        "kernel=3,defaults": lambda x: F.unfold(x, 3),
        "kernel=3,padding=1": lambda x: F.unfold(x, [3, 3], padding=1),
        "kernel=1": lambda x: F.unfold(x, 1),
        "kernel=2x3,stride=2x1": lambda x: F.unfold(x, (2, 3), stride=(2, 1)),
        "dilation=2,padding=2x1,stride=3": lambda x: F.unfold(x, 3, dilation=2, padding=(2, 1), stride=3),
        "unbatched": lambda x: F.unfold(x[0], 2, padding=1),
        "unfold,fold": lambda x: F.fold(F.unfold(x, 3, padding=1), (7, 9), 3, padding=1),
        "kernel=whole-image": lambda x: F.unfold(x, (7, 9)),
    }


@pytest.mark.parametrize("case", list(_cases()) if HAVE_TORCH else [])
def test_im2col(case: str) -> None:
    import torch

    torch.manual_seed(5)
    check(_cases()[case], torch.randn(2, 3, 7, 9))


def test_im2col_module() -> None:
    import torch

    torch.manual_seed(5)
    check(torch.nn.Unfold(kernel_size=(2, 2), dilation=1, padding=0, stride=2), torch.randn(1, 4, 6, 6))


def test_im2col_passes_inf_and_nan_through_exactly() -> None:
    """Copies only: the columns equal torch's bit for bit, an inf stays inf and a NaN stays
    in the columns that read it (a one-hot convolution would give inf * 0 = NaN)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    import opbridge as ob

    x = torch.randn(1, 2, 5, 6)
    x[0, 0, 2, 3], x[0, 1, 0, 0], x[0, 1, 4, 5] = float("inf"), float("-inf"), float("nan")
    graph = check(lambda t: F.unfold(t, 3, padding=1), x)
    got = next(iter(ob.interpret(graph, {graph.inputs[0].name: x.numpy()}).values()))
    want = F.unfold(x, 3, padding=1).numpy()
    assert np.isinf(want).any() and np.isnan(want).any()
    np.testing.assert_array_equal(got, want)
