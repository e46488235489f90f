"""Batch, layer, group and instance norm (inference) and vector norms vs torch."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _randomized(m: Any) -> Any:
    """Give a norm layer non-trivial statistics and affine parameters."""
    import torch

    g = torch.Generator().manual_seed(0)
    for name, t in list(m.named_parameters()) + list(m.named_buffers()):
        if t.dtype.is_floating_point:
            with torch.no_grad():
                t.copy_(torch.rand(t.shape, generator=g) + 0.5 if "var" in name or "weight" in name
                        else torch.randn(t.shape, generator=g))
    return m


def _cases() -> dict[str, tuple[Any, tuple[int, ...]]]:
    import torch
    import torch.nn.functional as F  # noqa: N812
    from torch import nn

    aten = torch.ops.aten
    ln_w, ln_b = torch.rand(8) + 0.5, torch.randn(8)
    # The "=eps" cases use an eps (0.5) that moves every output by several percent on inputs of
    # variance ~4, so a mapping that drops the model's eps for the default fails them.
    return {
        "batch_norm2d": (nn.BatchNorm2d(4), (2, 4, 5, 5)),
        "batch_norm2d=eps": (nn.BatchNorm2d(4, eps=1e-2), (2, 4, 5, 5)),
        "batch_norm2d=no-affine": (nn.BatchNorm2d(4, affine=False), (2, 4, 5, 5)),
        "batch_norm1d=2d-input": (nn.BatchNorm1d(6), (3, 6)),
        "batch_norm1d=3d-input": (nn.BatchNorm1d(6), (3, 6, 7)),
        "layer_norm=last": (nn.LayerNorm(8), (2, 5, 8)),
        "layer_norm=two-dims": (nn.LayerNorm((5, 8)), (2, 5, 8)),
        "layer_norm=no-affine": (nn.LayerNorm(8, elementwise_affine=False), (2, 5, 8)),
        "layer_norm=no-bias": (nn.LayerNorm(8, bias=False), (2, 5, 8)),
        "layer_norm=eps": (nn.LayerNorm(8, eps=0.5), (2, 5, 8)),
        "layer_norm=functional,eps": (lambda x: F.layer_norm(x, (5, 8), eps=0.5), (2, 5, 8)),
        "native_layer_norm=eps": (lambda x: aten.native_layer_norm(x, [8], ln_w, ln_b, 0.5)[0],
                                  (2, 5, 8)),
        "native_layer_norm=no-affine,eps": (
            lambda x: aten.native_layer_norm(x, [5, 8], None, None, 0.5)[0], (2, 5, 8)),
        "group_norm": (nn.GroupNorm(2, 6), (2, 6, 4, 4)),
        "group_norm=no-affine": (nn.GroupNorm(3, 6, affine=False), (2, 6, 4, 4)),
        "group_norm=eps": (nn.GroupNorm(2, 6, eps=0.5), (2, 6, 4, 4)),
        "instance_norm=absent": (nn.InstanceNorm2d(3), (2, 3, 5, 5)),
        "instance_norm=affine": (nn.InstanceNorm2d(3, affine=True), (2, 3, 5, 5)),
        "instance_norm=running-stats": (nn.InstanceNorm2d(3, track_running_stats=True), (2, 3, 5, 5)),
        "instance_norm1d": (nn.InstanceNorm1d(3, affine=True), (2, 3, 9)),
        "instance_norm=eps": (nn.InstanceNorm2d(3, eps=0.5, affine=True), (2, 3, 5, 5)),
        "instance_norm=running-stats,eps": (
            nn.InstanceNorm2d(3, eps=0.5, track_running_stats=True), (2, 3, 5, 5)),
        "normalize=absent": (lambda x: F.normalize(x), (2, 6, 3)),
        "normalize=p1,dim-1": (lambda x: F.normalize(x, p=1.0, dim=-1), (2, 6, 3)),
        "norm=fro": (lambda x: x.norm(dim=1, keepdim=True), (2, 6, 3)),
    }


@pytest.mark.parametrize("case", list(_cases()) if HAVE_TORCH else [])
def test_norm(case: str) -> None:
    import torch

    torch.manual_seed(4)
    module, shape = _cases()[case]
    if isinstance(module, torch.nn.Module):
        module = _randomized(module)
    check(module, torch.randn(*shape) * 2 + 1)


@pytest.mark.parametrize(
    "case", [k for k, (m, _) in _cases().items() if hasattr(m, "forward")] if HAVE_TORCH else []
)
def test_norm_scripted(case: str) -> None:
    """Scripted norm modules: their input checks fold away on the example's shapes."""
    import torch

    torch.manual_seed(4)
    module, shape = _cases()[case]
    check(_randomized(module), torch.randn(*shape) * 2 + 1, mode="script")
