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


class BoolShapeLogic(torch.nn.Module):
    """Scripted conditions on sizes (``and``, ``or``, ``not``): folded while converting."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        square = x.size(-1) == x.size(-2)
        batched = x.dim() == 4 or x.size(0) > 1
        if square and batched and not x.size(1) == 0:
            return x.transpose(-1, -2) * 3.0
        return x


class TupleOutputs(torch.nn.Module):
    """A tuple built, indexed and returned: TupleConstruct / TupleIndex / TupleUnpack."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        parts = (x + 1.0, x * 2.0, x - 3.0)
        a, b, c = parts
        return parts[1] + c, a.to(torch.float32) * int(x.size(0))
