"""A module with data-dependent control flow (test input for the exporter's refusal)."""

from __future__ import annotations

import torch


class Branchy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > 0):
            return x * 2
        return x - 1
