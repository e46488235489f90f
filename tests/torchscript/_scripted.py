"""Modules for torch.jit.script in the tests (scripting needs them in a source file)."""

from __future__ import annotations

import torch


class DataDependentReshape(torch.nn.Module):
    """A size computed from the data: the converter needs it while converting, and cannot."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(int(x.abs().sum().clamp(2, 2)), -1)


class Branchy(torch.nn.Module):
    """Data-dependent control flow: the exporter refuses it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > 0):
            return x * 2
        return x - 1


class ShapeCode(torch.nn.Module):
    """Scripted shape arithmetic: sizes, unpacking, numel, floordiv, indexing a size list, dtype."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        n = x.numel() // b
        y = x.reshape(b, n)
        if x.dim() == 4:
            y = y * 2.0
        s = x.size()
        y = y[:, : s[1] * h]
        pair = (y, y + 1.0)
        first, second = pair
        z = torch.zeros(len(s), dtype=x.dtype)
        return first.sum(1, keepdim=True) + second[:, :1] + z[:1] + float(w)
