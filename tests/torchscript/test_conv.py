"""Convolutions (1-3 D, grouped, depthwise, dilated, 'same'/'valid', transposed) and pooling."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _cases() -> dict[str, tuple[Any, tuple[int, ...]]]:
    import torch.nn.functional as F  # noqa: N812
    from torch import nn

    return {
        "conv1d": (nn.Conv1d(3, 5, 3), (2, 3, 11)),
        "conv1d=stride2,pad1": (nn.Conv1d(3, 5, 4, stride=2, padding=1), (2, 3, 11)),
        "conv2d=absent": (nn.Conv2d(3, 4, 3), (1, 3, 9, 8)),
        "conv2d=no-bias": (nn.Conv2d(3, 4, 3, bias=False), (1, 3, 9, 8)),
        "conv2d=stride,pad": (nn.Conv2d(3, 4, (3, 5), stride=(2, 1), padding=(1, 2)), (1, 3, 9, 8)),
        "conv2d=dilation2": (nn.Conv2d(3, 4, 3, dilation=2, padding=2), (1, 3, 9, 8)),
        "conv2d=groups": (nn.Conv2d(4, 6, 3, groups=2, padding=1), (1, 4, 7, 7)),
        "conv2d=depthwise": (nn.Conv2d(4, 4, 3, groups=4, padding=1), (1, 4, 7, 7)),
        "conv2d=same": (nn.Conv2d(3, 4, 4, padding="same"), (1, 3, 8, 8)),
        "conv2d=valid": (nn.Conv2d(3, 4, 3, padding="valid"), (1, 3, 8, 8)),
        "conv3d": (nn.Conv3d(2, 3, 3, padding=1), (1, 2, 4, 5, 6)),
        "conv_transpose1d": (nn.ConvTranspose1d(3, 2, 4, stride=2, padding=1), (1, 3, 7)),
        "conv_transpose2d=absent": (nn.ConvTranspose2d(3, 2, 3), (1, 3, 5, 5)),
        "conv_transpose2d=stride,outpad": (nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1,
                                                              output_padding=1), (1, 3, 5, 5)),
        "conv_transpose2d=groups": (nn.ConvTranspose2d(4, 6, 3, groups=2), (1, 4, 5, 5)),
        "conv_transpose3d": (nn.ConvTranspose3d(2, 2, 2, stride=2), (1, 2, 3, 3, 3)),
        "functional-conv2d": (lambda x: F.conv2d(x, x[:, :, :3, :3].permute(1, 0, 2, 3).contiguous()),
                              (3, 3, 6, 6)),
        "max_pool1d": (nn.MaxPool1d(3, 2), (1, 3, 11)),
        "max_pool2d=absent": (nn.MaxPool2d(2), (1, 3, 8, 9)),
        "max_pool2d=pad,stride": (nn.MaxPool2d(3, 2, padding=1), (1, 3, 8, 9)),
        "max_pool2d=ceil": (nn.MaxPool2d(3, 2, ceil_mode=True), (1, 3, 8, 9)),
        "max_pool2d=dilation": (nn.MaxPool2d(2, 1, dilation=2), (1, 3, 8, 9)),
        "max_pool3d": (nn.MaxPool3d(2), (1, 2, 4, 4, 4)),
        "avg_pool1d": (nn.AvgPool1d(3, 2, padding=1), (1, 3, 11)),
        "avg_pool2d=absent": (nn.AvgPool2d(2), (1, 3, 8, 9)),
        "avg_pool2d=pad,include": (nn.AvgPool2d(3, 2, padding=1), (1, 3, 8, 9)),
        "avg_pool2d=pad,exclude": (nn.AvgPool2d(3, 2, padding=1, count_include_pad=False), (1, 3, 8, 9)),
        "avg_pool2d=ceil": (nn.AvgPool2d(3, 2, ceil_mode=True), (1, 3, 8, 8)),
        "avg_pool3d": (nn.AvgPool3d(2), (1, 2, 4, 4, 4)),
        "adaptive_avg_pool1d=1": (nn.AdaptiveAvgPool1d(1), (1, 3, 10)),
        "adaptive_avg_pool2d=1": (nn.AdaptiveAvgPool2d(1), (1, 3, 6, 8)),
        "adaptive_avg_pool2d=divisible": (nn.AdaptiveAvgPool2d((3, 2)), (1, 3, 6, 8)),
        "adaptive_avg_pool2d=None": (nn.AdaptiveAvgPool2d((None, 2)), (1, 3, 6, 8)),
        "adaptive_avg_pool3d=1": (nn.AdaptiveAvgPool3d(1), (1, 2, 3, 4, 5)),
        "adaptive_max_pool2d=1": (nn.AdaptiveMaxPool2d(1), (1, 3, 6, 8)),
        "adaptive_max_pool1d=2": (nn.AdaptiveMaxPool1d(2), (1, 3, 8)),
    }


@pytest.mark.parametrize("case", list(_cases()) if HAVE_TORCH else [])
def test_conv_pool(case: str) -> None:
    import torch

    torch.manual_seed(3)
    module, shape = _cases()[case]
    check(module, torch.randn(*shape))


@pytest.mark.parametrize(
    ("pool", "shape"),
    [("avg=7to4", (1, 2, 7, 7)), ("max=7x9to3x5", (1, 2, 7, 9)), ("avg1d=10to3", (1, 2, 10))],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_adaptive_pool_uneven_windows(pool: str, shape: tuple[int, ...]) -> None:
    import torch

    torch.manual_seed(3)
    module = {"avg=7to4": torch.nn.AdaptiveAvgPool2d(4), "max=7x9to3x5": torch.nn.AdaptiveMaxPool2d((3, 5)),
              "avg1d=10to3": torch.nn.AdaptiveAvgPool1d(3)}[pool]
    check(module, torch.randn(*shape))


@pytest.mark.parametrize(
    "case", [k for k, (m, _) in _cases().items()
             # torch cannot script AdaptiveAvgPool2d((None, 2)) itself
             if not k.startswith("functional") and k != "adaptive_avg_pool2d=None"] if HAVE_TORCH else []
)
def test_conv_pool_scripted(case: str) -> None:
    """Scripted modules record aten::conv2d, aten::max_pool2d … rather than the traced forms."""
    import torch

    torch.manual_seed(3)
    module, shape = _cases()[case]
    check(module, torch.randn(*shape), mode="script")
