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
