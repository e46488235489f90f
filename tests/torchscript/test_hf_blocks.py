"""Hugging Face-style transformer pieces written with torch.nn the way the transformers library
writes them (LLaMA's RMSNorm, rotary embeddings, repeat_kv and SwiGLU MLP; BERT's extended
attention mask), each exported, converted and compared with torch within 1e-4 relative."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.conftest import requires_torch

from .helpers import check

pytestmark = requires_torch

DIM, HEADS, KV_HEADS, SEQ = 32, 4, 2, 6


def _blocks() -> Any:
    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812

    class RMSNorm(nn.Module):
        def __init__(self, dim: int, eps: float = 1e-6) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.rand(dim) + 0.5)
            self.eps = eps

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            dtype = x.dtype
            x = x.to(torch.float32)
            var = x.pow(2).mean(-1, keepdim=True)
            return self.weight * (x * torch.rsqrt(var + self.eps)).to(dtype)

    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    class Rotary(nn.Module):
        def __init__(self, dim: int, base: float = 10000.0) -> None:
            super().__init__()
            inv = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
            self.register_buffer("inv_freq", inv, persistent=False)

        def forward(self, x: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            freqs = pos[:, :, None].float() * self.inv_freq[None, None, :]
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def apply_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                     sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    def repeat_kv(x: torch.Tensor, n: int) -> torch.Tensor:
        b, h, t, d = x.shape
        return x[:, :, None, :, :].expand(b, h, n, t, d).reshape(b, h * n, t, d)

    class SwiGLU(nn.Module):
        def __init__(self, dim: int, hidden: int) -> None:
            super().__init__()
            self.gate_proj = nn.Linear(dim, hidden, bias=False)
            self.up_proj = nn.Linear(dim, hidden, bias=False)
            self.down_proj = nn.Linear(hidden, dim, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class LlamaAttention(nn.Module):
        """Grouped-query attention with rotary embeddings, a causal mask and a static KV cache
        written in place (``cache[:, :, start:end] = k``), as transformers' StaticCache does."""

        def __init__(self, sdpa: bool) -> None:
            super().__init__()
            self.hd = DIM // HEADS
            self.q_proj = nn.Linear(DIM, HEADS * self.hd, bias=False)
            self.k_proj = nn.Linear(DIM, KV_HEADS * self.hd, bias=False)
            self.v_proj = nn.Linear(DIM, KV_HEADS * self.hd, bias=False)
            self.o_proj = nn.Linear(HEADS * self.hd, DIM, bias=False)
            self.rotary = Rotary(self.hd)
            self.sdpa = sdpa
            self.register_buffer("k_cache", torch.zeros(1, KV_HEADS, 2 * SEQ, self.hd))
            self.register_buffer("v_cache", torch.zeros(1, KV_HEADS, 2 * SEQ, self.hd))

        def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            q = self.q_proj(x).view(b, t, HEADS, self.hd).transpose(1, 2)
            k = self.k_proj(x).view(b, t, KV_HEADS, self.hd).transpose(1, 2)
            v = self.v_proj(x).view(b, t, KV_HEADS, self.hd).transpose(1, 2)
            cos, sin = self.rotary(v, pos)
            q, k = apply_rotary(q, k, cos, sin)
            self.k_cache[:, :, SEQ:SEQ + t] = k
            self.v_cache[:, :, SEQ:SEQ + t].copy_(v)
            k = repeat_kv(self.k_cache[:, :, SEQ:SEQ + t], HEADS // KV_HEADS)
            v = repeat_kv(self.v_cache[:, :, SEQ:SEQ + t], HEADS // KV_HEADS)
            mask = torch.full((t, t), float("-inf")).triu(1)
            if self.sdpa:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            else:
                w = q @ k.transpose(2, 3) / math.sqrt(self.hd) + mask
                out = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype) @ v
            return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))

    class LlamaDecoderLayer(nn.Module):
        def __init__(self, sdpa: bool) -> None:
            super().__init__()
            self.input_layernorm = RMSNorm(DIM)
            self.self_attn = LlamaAttention(sdpa)
            self.post_attention_layernorm = RMSNorm(DIM)
            self.mlp = SwiGLU(DIM, 3 * DIM)

        def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
            x = x + self.self_attn(self.input_layernorm(x), pos)
            return x + self.mlp(self.post_attention_layernorm(x))

    class BertLayer(nn.Module):
        """Post-norm encoder layer with the extended padding mask (1 - mask) * finfo.min."""

        def __init__(self) -> None:
            super().__init__()
            self.query, self.key, self.value = (nn.Linear(DIM, DIM) for _ in range(3))
            self.dense = nn.Linear(DIM, DIM)
            self.ln1, self.ln2 = nn.LayerNorm(DIM, eps=1e-12), nn.LayerNorm(DIM, eps=1e-12)
            self.intermediate, self.output = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

        def heads(self, x: torch.Tensor) -> torch.Tensor:
            return x.view(x.shape[0], x.shape[1], HEADS, DIM // HEADS).permute(0, 2, 1, 3)

        def forward(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            ext = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
            q, k, v = self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
            scores = q @ k.transpose(-1, -2) / math.sqrt(DIM // HEADS) + ext
            ctx = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).contiguous()
            x = self.ln1(x + self.dense(ctx.view(x.shape)))
            return self.ln2(x + self.output(F.gelu(self.intermediate(x))))

    return RMSNorm, Rotary, apply_rotary, SwiGLU, LlamaDecoderLayer, BertLayer


def _x(*shape: int) -> Any:
    import torch

    return torch.randn(*shape)


def test_rmsnorm() -> None:
    torch_rms = _blocks()[0]
    check(torch_rms(DIM), _x(2, SEQ, DIM) * 3)


def test_torch_rmsnorm_module() -> None:
    import torch

    norm = torch.nn.RMSNorm(DIM, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(DIM) + 0.5)
    check(norm, _x(2, SEQ, DIM))


def test_rotary_embedding() -> None:
    import torch

    _, rotary, apply_rotary, *_ = _blocks()
    rot = rotary(8)

    def fn(q: Any, k: Any, pos: Any) -> Any:
        cos, sin = rot(q, pos)
        return apply_rotary(q, k, cos, sin)

    check(fn, _x(1, HEADS, SEQ, 8), _x(1, KV_HEADS, SEQ, 8), torch.arange(3, 3 + SEQ)[None])


def test_swiglu() -> None:
    check(_blocks()[3](DIM, 3 * DIM), _x(2, SEQ, DIM))


@pytest.mark.parametrize("sdpa", [False, True], ids=["eager", "sdpa"])
def test_llama_decoder_layer(sdpa: bool) -> None:
    import torch

    torch.manual_seed(5)
    layer = _blocks()[4](sdpa)
    check(layer, _x(1, SEQ, DIM), torch.arange(SEQ, 2 * SEQ)[None])


def test_bert_encoder_layer_with_padding_mask() -> None:
    import torch

    torch.manual_seed(6)
    mask = torch.ones(2, SEQ, dtype=torch.int64)
    mask[1, 4:] = 0
    check(_blocks()[5](), _x(2, SEQ, DIM), mask)


def test_torch_transformer_layers_with_masks() -> None:
    import torch

    class EncoderDecoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc = torch.nn.TransformerEncoderLayer(DIM, HEADS, 64, dropout=0.0, batch_first=True)
            self.dec = torch.nn.TransformerDecoderLayer(DIM, HEADS, 64, dropout=0.0,
                                                        batch_first=True, norm_first=True)

        def forward(self, src: torch.Tensor, tgt: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
            causal = torch.nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
            memory = self.enc(src, src_key_padding_mask=pad)
            return self.dec(tgt, memory, tgt_mask=causal, tgt_is_causal=True,
                            memory_key_padding_mask=pad)

    torch.manual_seed(7)
    pad = torch.zeros(2, SEQ, dtype=torch.bool)
    pad[0, -2:] = True
    check(EncoderDecoder(), _x(2, SEQ, DIM), _x(2, SEQ, DIM), pad)
