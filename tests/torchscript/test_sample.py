"""grid_sample (every mode x padding x align_corners, 2-D and 3-D) and fold vs torch."""

from __future__ import annotations

import pytest

from tests.conftest import requires_torch

from .helpers import check

pytestmark = requires_torch

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")


def _grid(*shape: int, spread: float = 1.25):
    import torch

    g = torch.Generator().manual_seed(18)
    return (torch.rand(*shape, generator=g) * 2 - 1) * spread


@pytest.mark.parametrize("align", [False, True], ids=lambda a: f"align_corners={a}")
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", MODES)
def test_grid_sample_2d(mode, padding, align):
    import torch
    import torch.nn.functional as F  # noqa: N812

    x = torch.randn(2, 3, 5, 6)
    check(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align),
          x, _grid(2, 4, 7, 2))


@pytest.mark.parametrize("align", [False, True], ids=lambda a: f"align_corners={a}")
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d(mode, padding, align):
    import torch
    import torch.nn.functional as F  # noqa: N812

    x = torch.randn(2, 2, 3, 4, 5)
    check(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align),
          x, _grid(2, 2, 3, 4, 3))


def test_grid_sample_defaults_and_affine_grid():
    """The usual spatial-transformer pair; grid_sample's arguments absent (bilinear, zeros,
    align_corners False)."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    theta = torch.tensor([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]]])
    grid = F.affine_grid(theta, [1, 3, 6, 8], align_corners=False)
    check(lambda x, g: F.grid_sample(x, g), torch.randn(1, 3, 6, 8), grid)


@pytest.mark.parametrize("kwargs, image", [
    ({"kernel_size": 3}, (6, 7)),
    ({"kernel_size": (2, 3), "stride": (2, 1), "padding": 1}, (7, 6)),
    ({"kernel_size": 2, "dilation": (2, 1), "padding": (1, 0), "stride": 2}, (8, 9)),
], ids=["kernel", "stride,padding", "dilation"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_fold(kwargs, image, batched):
    """F.fold (aten::col2im) of the columns F.unfold makes, overlaps summed."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    cols = F.unfold(torch.randn(2, 3, *image), **kwargs)
    if not batched:
        cols = cols[0]
    check(lambda c: F.fold(c, image, **kwargs), cols)
