"""Small whole models of different kinds, written here (torch needed to build them)."""

from __future__ import annotations

from typing import Any


def build(name: str) -> tuple[Any, tuple[Any, ...]]:
    """(module in eval mode with non-trivial norm statistics, example inputs)."""
    import torch

    torch.manual_seed(0)
    model, inputs = _BUILDERS[name]()
    model = model.eval()
    g = torch.Generator().manual_seed(1)
    for mod in model.modules():
        if isinstance(mod, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            with torch.no_grad():
                mod.running_mean.copy_(torch.randn(mod.running_mean.shape, generator=g) * 0.1)
                mod.running_var.copy_(torch.rand(mod.running_var.shape, generator=g) + 0.5)
                mod.weight.copy_(torch.rand(mod.weight.shape, generator=g) + 0.5)
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=g) * 0.1)
    return model, inputs


def _resnet() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch import nn

    class Basic(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            idt = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + idt)

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = nn.Sequential(Basic(8, 8, 1), Basic(8, 8, 1))
            self.layer2 = nn.Sequential(Basic(8, 16, 2), Basic(16, 16, 1))
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer2(self.layer1(x))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return ResNet(), (torch.randn(2, 3, 32, 32),)


def _mobilenet() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch import nn

    class SE(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.fc1 = nn.Conv2d(c, c // 4, 1)
            self.fc2 = nn.Conv2d(c // 4, c, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            s = nn.functional.adaptive_avg_pool2d(x, 1)
            return x * nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int, se: bool) -> None:
            super().__init__()
            hidden = cin * expand
            self.use_res = stride == 1 and cin == cout
            self.block = nn.Sequential(
                nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.Hardswish(),
                nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),  # depthwise
                nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
                SE(hidden) if se else nn.Identity(),
                nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout),
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.block(x)
            return x + y if self.use_res else y

    class MobileNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
            self.features = nn.Sequential(InvertedResidual(8, 8, 1, 2, True),
                                          InvertedResidual(8, 16, 2, 3, False),
                                          InvertedResidual(16, 16, 1, 3, True))
            self.head = nn.Sequential(nn.Linear(16, 32), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(32, 5))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.features(self.stem(x))
            return self.head(x.mean((2, 3)))

    return MobileNet(), (torch.randn(1, 3, 32, 32),)


def _transformer() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch import nn

    class SDPABlock(nn.Module):
        """A hand-written pre-norm block with scaled_dot_product_attention and tanh-GELU."""

        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.heads = heads
            self.norm1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.norm2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(approximate="tanh"), nn.Linear(2 * d, d))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.norm2(x))

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(50, 16)
            self.pos = nn.Parameter(torch.randn(1, 12, 16) * 0.1)
            self.layers = nn.ModuleList([
                nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True),
                nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, activation="gelu", batch_first=True,
                                           norm_first=True),
            ])
            self.block = SDPABlock(16, 2)
            self.norm = nn.LayerNorm(16)
            self.cls = nn.Linear(16, 3)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
            for layer in self.layers:
                x = layer(x)
            x = self.norm(self.block(x))
            return torch.log_softmax(self.cls(x[:, 0]), dim=-1)

    return Encoder(), (torch.randint(0, 50, (2, 10)),)


def _audio() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch import nn

    class KWS(nn.Module):
        """A 1-D conv keyword spotter over a raw waveform."""

        def __init__(self) -> None:
            super().__init__()
            self.frontend = nn.Sequential(nn.Conv1d(1, 8, 40, stride=8, padding=16), nn.BatchNorm1d(8),
                                          nn.LeakyReLU(0.1), nn.MaxPool1d(4))
            self.body = nn.Sequential(
                nn.Conv1d(8, 16, 5, padding=2), nn.BatchNorm1d(16), nn.SiLU(),
                nn.Conv1d(16, 16, 3, padding=2, dilation=2, groups=4), nn.ReLU(),
                nn.AvgPool1d(2),
            )
            self.out = nn.Linear(16, 6)

        def forward(self, wav: torch.Tensor) -> torch.Tensor:
            x = self.body(self.frontend(wav.unsqueeze(1)))
            x = torch.amax(x, dim=-1)
            return self.out(x).softmax(-1)

    return KWS(), (torch.randn(2, 1600),)


def _detect_head() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch import nn

    class Head(nn.Module):
        """A YOLO-style head: conv, view/permute, sigmoid, grid arithmetic, cat over levels."""

        def __init__(self) -> None:
            super().__init__()
            self.na, self.no = 2, 7
            self.convs = nn.ModuleList([nn.Conv2d(8, 14, 1), nn.Conv2d(8, 14, 1)])
            self.up = nn.Upsample(scale_factor=2, mode="nearest")

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            outs = []
            for i, feat in enumerate([x, self.up(x)]):
                p = self.convs[i](feat)
                b, _, h, w = p.shape
                p = p.view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
                gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
                grid = torch.stack((gx, gy), 2).view(1, 1, h, w, 2).float()
                xy = (p[..., :2] * 2 - 0.5 + grid) * (8.0 / (i + 1))
                wh = (p[..., 2:4] * 2) ** 2 * 16
                outs.append(torch.cat((xy, wh, p[..., 4:]), -1).view(b, -1, self.no))
            return torch.cat(outs, 1)

    return Head(), (torch.randn(1, 8, 4, 6),)


def _gpt() -> tuple[Any, tuple[Any, ...]]:
    import math

    import torch
    from torch import nn

    class CausalSelfAttention(nn.Module):
        """nanoGPT-style attention: a tril mask buffer, masked_fill with -inf, explicit softmax."""

        def __init__(self, d: int, heads: int, t: int) -> None:
            super().__init__()
            self.heads = heads
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, c = x.size()
            q, k, v = self.c_attn(x).split(c, dim=2)
            k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
            q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
            v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
            y = nn.functional.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    def new_gelu(x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    class Block(nn.Module):
        def __init__(self, d: int, heads: int, t: int) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.attn = CausalSelfAttention(d, heads, t)
            self.ln_2 = nn.LayerNorm(d)
            self.c_fc = nn.Linear(d, 4 * d)
            self.c_proj = nn.Linear(4 * d, d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln_1(x))
            return x + self.c_proj(new_gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(40, 16)
            self.wpe = nn.Embedding(12, 16)
            self.h = nn.ModuleList([Block(16, 2, 12), Block(16, 4, 12)])
            self.ln_f = nn.LayerNorm(16)
            self.lm_head = nn.Linear(16, 40, bias=False)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(0, idx.size(1), dtype=torch.long).unsqueeze(0)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))[:, -1, :]

    return GPT(), (torch.randint(0, 40, (2, 9)),)


def _unet() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch import nn

    def double(cin: int, cout: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(2, cout), nn.ReLU(inplace=True),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        """A two-level U-Net: max-pool down, transposed-conv and bilinear up, skip concatenations."""

        def __init__(self) -> None:
            super().__init__()
            self.inc = double(3, 8)
            self.down1 = nn.Sequential(nn.MaxPool2d(2), double(8, 16))
            self.down2 = nn.Sequential(nn.MaxPool2d(2), double(16, 16))
            self.up1 = nn.ConvTranspose2d(16, 16, 2, stride=2)
            self.conv1 = double(32, 8)
            self.conv2 = double(16, 8)
            self.outc = nn.Conv2d(8, 2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x1 = self.inc(x)
            x2 = self.down1(x1)
            x3 = self.down2(x2)
            y = self.conv1(torch.cat([x2, self.up1(x3)], dim=1))
            y = nn.functional.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
            y = self.conv2(torch.cat([x1, y], dim=1))
            return torch.sigmoid(self.outc(y))

    return UNet(), (torch.randn(1, 3, 16, 20),)


_BUILDERS = {"resnet": _resnet, "mobilenet": _mobilenet, "transformer": _transformer,
             "audio_conv1d": _audio, "detect_head": _detect_head, "gpt": _gpt, "unet": _unet}
MODELS = tuple(_BUILDERS)
