"""Casts, tensor creation from static shapes, and interpolate/upsample vs torch."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _cases() -> dict[str, Any]:
    import torch
    import torch.nn.functional as F  # noqa: N812

    interp = F.interpolate
    return {
        "to=float16": lambda x: x.to(torch.float16),
        "to=float16,roundtrip": lambda x: x.half().float() * 2,
        "to=int64": lambda x: (x * 3).to(torch.int64),
        "to=other": lambda x: (x > 0).to(x) + x,
        "to=device,dtype": lambda x: x.to("cpu", torch.float64),
        "type_as": lambda x: (x > 0).type_as(x),
        "zeros_like": lambda x: torch.zeros_like(x) + x,
        "ones_like=dtype": lambda x: torch.ones_like(x, dtype=torch.int32),
        "full_like": lambda x: torch.full_like(x, 2.5) * x,
        "new_zeros": lambda x: x.new_zeros(3) + x[0, 0, 0, :3],
        "new_full": lambda x: x.new_full((2, 2), 7.0) + x[0, 0, :2, :2],
        "arange=size": lambda x: torch.arange(x.size(3)) + x,
        "arange=start,end,step": lambda x: torch.arange(1, x.size(3) * 2, 2, dtype=torch.float32) * x,
        "zeros=from-size": lambda x: torch.zeros(x.size(0), 2) + 1,
        "interpolate=nearest,scale2": lambda x: interp(x, scale_factor=2, mode="nearest"),
        "interpolate=nearest,size": lambda x: interp(x, size=(7, 9), mode="nearest"),
        "interpolate=nearest-exact": lambda x: interp(x, size=(7, 9), mode="nearest-exact"),
        "interpolate=bilinear": lambda x: interp(x, scale_factor=2, mode="bilinear"),
        "interpolate=bilinear,size": lambda x: interp(x, size=(3, 7), mode="bilinear"),
        "interpolate=bilinear,align": lambda x: interp(x, size=(7, 9), mode="bilinear", align_corners=True),
        "interpolate=bilinear,align,scale": lambda x: interp(x, scale_factor=1.5, mode="bilinear",
                                                             align_corners=True),
        "interpolate=bicubic": lambda x: interp(x, scale_factor=2, mode="bicubic"),
        "interpolate=linear1d": lambda x: interp(x[0], scale_factor=2, mode="linear"),
        "upsample-module": torch.nn.Upsample(scale_factor=2),
        "interpolate=nearest1d": lambda x: interp(x[0], scale_factor=3, mode="nearest"),
        "interpolate=nearest-exact1d": lambda x: interp(x[0], size=7, mode="nearest-exact"),
        "interpolate=nearest3d": lambda x: interp(x.unsqueeze(2), scale_factor=(1, 2, 2), mode="nearest"),
        "interpolate=trilinear": lambda x: interp(x.unsqueeze(2), size=(2, 6, 7), mode="trilinear"),
    }


@pytest.mark.parametrize("case", list(_cases()) if HAVE_TORCH else [])
def test_misc(case: str) -> None:
    import torch

    torch.manual_seed(10)
    check(_cases()[case], torch.randn(1, 2, 4, 5))
