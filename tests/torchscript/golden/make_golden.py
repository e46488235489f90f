"""Write the golden TorchScript-json files the torch-free tests convert (needs torch; run by hand).

    python -m tests.torchscript.golden.make_golden        # from the repository root

For each small model below it writes, into this folder:

- ``NAME.ts.json`` and ``NAME.ts.safetensors``: the model exported with ``export_torchscript``
  (no .safetensors when the graph holds no tensor);
- ``NAME.inputs.npz``: the example inputs, by graph-input name;
- ``NAME.expected.npz``: torch's outputs on them (``out0``, ``out1``, ...).

No pickle: ``np.load(..., allow_pickle=False)`` reads both npz files. The models are small
(a few KB each) and together cover every mapper family (activation, conv and pool, elementwise,
matmul, misc, norm, prim, reduce, shape, tensor) and both export modes (trace and script).
tests/torchscript/test_golden.py converts them without torch and compares with the stored
outputs; when torch is installed it also checks that the stored outputs are still torch's for
the models written here. Regenerate after changing a model here, or the export format.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def _cnn() -> tuple[Any, tuple[Any, ...], str]:
    """conv, grouped conv, batch norm, relu6, max/avg pool, adaptive pool, flatten, linear."""
    import torch
    from torch import nn

    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU6(),
        nn.MaxPool2d(2, ceil_mode=True),
        nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=2, bias=False), nn.LeakyReLU(0.2),
        nn.AvgPool2d(2, stride=1, padding=1, count_include_pad=False),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
    return model, (torch.randn(2, 3, 9, 9),), "trace"


def _cnn_scripted() -> tuple[Any, tuple[Any, ...], str]:
    """A residual block exported with torch.jit.script (frozen), with a transposed conv."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 3, padding=1)
            self.bn = nn.BatchNorm2d(3)
            self.up = nn.ConvTranspose2d(3, 2, 2, stride=2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.bn(self.conv(x)) + x)
            return torch.sigmoid(self.up(y))

    return Block(), (torch.randn(1, 3, 5, 5),), "script"


def _mlp_norms() -> tuple[Any, tuple[Any, ...], str]:
    """linear, layer norm (non-default eps), gelu, group and instance norm, softmax, log_softmax."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(6, 8)
            self.ln = nn.LayerNorm(8, eps=1e-2)
            self.fc2 = nn.Linear(8, 6, bias=False)
            self.gn = nn.GroupNorm(2, 4, eps=1e-3)
            self.inorm = nn.InstanceNorm1d(4, affine=True, eps=1e-2)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.fc2(nn.functional.gelu(self.ln(self.fc1(x))))   # (2, 4, 6)
            a = torch.softmax(self.gn(h.unsqueeze(-1)).squeeze(-1), dim=-1)
            b = torch.log_softmax(self.inorm(h), dim=1)
            return a, b

    return Net(), (torch.randn(2, 4, 6),), "trace"


def _elementwise() -> tuple[Any, tuple[Any, ...], str]:
    """arithmetic with broadcasting and scalars, unary math, comparisons, where, clamp, pow,
    and the activations tanh, hardswish, elu, softplus, silu."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            a = x * y + torch.sin(x) - torch.exp(-y.abs()) / (1.0 + x * x)
            b = torch.where(x > y, torch.sqrt(x.abs() + 1), y.pow(2)) - torch.clamp(x, -0.5, 0.7)
            c = torch.maximum(a, b) * 0.5 + torch.minimum(a, b).floor()
            act = (torch.tanh(c) + nn.functional.hardswish(a) + nn.functional.elu(b)
                   + nn.functional.softplus(x) + nn.functional.silu(y))
            return act, torch.logical_and(x >= 0, y < 0.5)

    return Net(), (torch.randn(2, 3, 4), torch.randn(3, 1)), "trace"


def _shapes() -> tuple[Any, tuple[Any, ...], str]:
    """view from size(), permute, transpose, cat, chunk (a list unpacked), stack, slicing,
    squeeze/unsqueeze, expand, flatten, repeat, flip, and a tuple of outputs."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            n = x.size(0)
            a, b = torch.chunk(x, 2, dim=1)                        # (2, 2, 3, 4) each
            c = torch.cat([b, a], dim=1).permute(0, 2, 3, 1)        # (2, 3, 4, 4)
            d = c.transpose(1, 2).reshape(n, -1)                    # (2, 48)
            e = torch.stack([x[:, 1:3, ::2, 1], x[:, 2:, 1:, -1]], dim=0)[:1]
            f = x.unsqueeze(2)[:, :, :, 0].expand(2, 4, 2, 4).flatten(1).repeat(1, 2).flip(1)
            return d, e.squeeze(0), f

    return Net(), (torch.randn(2, 4, 3, 4),), "trace"


def _reduce() -> tuple[Any, tuple[Any, ...], str]:
    """mean, sum, amax, min over dims, argmax (integer output), logsumexp, norm, var, cumsum."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            s = x.mean(dim=(2, 3), keepdim=True) + x.sum(dim=1, keepdim=True).amax(dim=-1, keepdim=True)
            t = torch.logsumexp(x, dim=-1) - x.norm(dim=-1) + x.var(dim=-1) + x.min(dim=-1)[0]
            return s.squeeze(-1), t.cumsum(dim=1), x.argmax(dim=2)

    return Net(), (torch.randn(2, 3, 4, 5),), "trace"


def _attention() -> tuple[Any, tuple[Any, ...], str]:
    """matmul, bmm-style batched matmul, scaled softmax attention with a masked_fill, addmm."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(8, 24)
            self.out = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(x).split(8, dim=-1)
            w = torch.matmul(q, k.transpose(-2, -1)) / 8 ** 0.5
            mask = torch.ones(5, 5).triu(1).bool()
            p = torch.softmax(w.masked_fill(mask, float("-inf")), dim=-1)
            return self.out(torch.bmm(p, v))

    return Net(), (torch.randn(2, 5, 8),), "trace"


def _resize_pad() -> tuple[Any, tuple[Any, ...], str]:
    """interpolate (nearest, bilinear), pad (constant, reflect), pixel shuffle, dropout (eval)."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.drop = nn.Dropout(0.3)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            up = nn.functional.interpolate(x, scale_factor=2, mode="nearest")
            bl = nn.functional.interpolate(x, size=(5, 7), mode="bilinear", align_corners=False)
            padded = nn.functional.pad(up, (1, 2, 0, 1), value=0.5) + 0
            refl = nn.functional.pad(bl, (1, 1, 2, 2), mode="reflect")
            return self.drop(nn.functional.pixel_shuffle(padded[:, :, :8, :8], 2)), refl

    return Net(), (torch.randn(1, 4, 3, 4),), "trace"


MODELS: dict[str, Callable[[], tuple[Any, tuple[Any, ...], str]]] = {
    "cnn": _cnn,
    "cnn_scripted": _cnn_scripted,
    "mlp_norms": _mlp_norms,
    "elementwise": _elementwise,
    "shapes": _shapes,
    "reduce": _reduce,
    "attention": _attention,
    "resize_pad": _resize_pad,
}


def build(name: str) -> tuple[Any, tuple[Any, ...], str]:
    """(module in eval mode with seeded, non-trivial parameters and norm statistics, example
    inputs, export mode) for golden model ``name``."""
    import torch

    torch.manual_seed(0)
    model, inputs, mode = MODELS[name]()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for key, t in model.state_dict().items():
            if key.endswith("running_var"):
                t.copy_(torch.rand(t.shape, generator=g) + 0.5)
            elif key.endswith("running_mean"):
                t.copy_(torch.randn(t.shape, generator=g) * 0.2)
    return model.eval(), inputs, mode


def torch_outputs(model: Any, inputs: tuple[Any, ...]) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        out = model(*inputs)
    return [t.numpy() for t in (out if isinstance(out, (tuple, list)) else (out,))]


def write(name: str, folder: Path = HERE) -> list[Path]:
    """Export golden model ``name`` into ``folder``; returns the files written."""
    from opbridge.export.torchscript import export_torchscript
    from opbridge.parsers.torchscript_json import parse_torchscript_json

    model, inputs, mode = build(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = export_torchscript(model, inputs, folder / f"{name}.ts.json", mode=mode)
    names = [v.name for v in parse_torchscript_json(path).inputs]
    np.savez(folder / f"{name}.inputs.npz", **{n: t.numpy() for n, t in zip(names, inputs)})
    np.savez(folder / f"{name}.expected.npz",
             **{f"out{i}": a for i, a in enumerate(torch_outputs(model, inputs))})
    files = [path, path.with_suffix(".safetensors"), folder / f"{name}.inputs.npz",
             folder / f"{name}.expected.npz"]
    return [p for p in files if p.is_file()]  # a model without tensors has no .safetensors


def main() -> int:
    import torch

    sizes = {}
    for name in MODELS:
        for p in write(name):
            sizes[p.name] = p.stat().st_size
    (HERE / "MANIFEST.json").write_text(json.dumps(
        {"torch": torch.__version__, "files": dict(sorted(sizes.items()))}, indent=1) + "\n")
    print(f"wrote {len(sizes)} files, {sum(sizes.values()) / 1024:.0f} KiB, with torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
