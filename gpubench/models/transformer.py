"""A small decoder-only Transformer language model (GPT-style, pre-LayerNorm, causal SDPA)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from gpubench.models.workload import Workload, generator, language_model


@dataclass(frozen=True)
class TransformerConfig:
    layers: int = 2
    width: int = 128
    heads: int = 4
    seq_len: int = 64
    vocab: int = 256

    def __post_init__(self) -> None:
        if self.width % self.heads:
            raise ValueError(f"width {self.width} is not divisible by heads {self.heads}")


PRESETS = {
    "tiny": TransformerConfig(layers=1, width=32, heads=2, seq_len=16, vocab=64),
    "small": TransformerConfig(layers=2, width=128, heads=4, seq_len=64, vocab=256),
    "base": TransformerConfig(layers=12, width=1024, heads=16, seq_len=1024, vocab=32768),
}


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(cfg.width)
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)
        self.ln2 = nn.LayerNorm(cfg.width)
        self.fc = nn.Linear(cfg.width, 4 * cfg.width)
        self.out = nn.Linear(4 * cfg.width, cfg.width)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.width)
        self.pos = nn.Embedding(cfg.seq_len, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.vocab, bias=False)

    def forward(self, idx: Tensor) -> Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def training_flops_per_sample(cfg: TransformerConfig) -> float:
    """Forward + backward FLOPs of one sequence: 3x the forward's matmuls.

    Per token the forward does 2*(12*L*d^2 + d*V) in its linear layers and 4*T*d*L in attention
    (QK^T and AV over the full T x T score matrix: the convention FlopCounterMode uses for SDPA,
    so the causal mask's skipped half is counted as work).
    """
    d, L, T, V = cfg.width, cfg.layers, cfg.seq_len, cfg.vocab
    per_token_forward = 2 * (12 * L * d * d + d * V) + 4 * T * d * L
    return 3.0 * per_token_forward * T


def _sequences(cfg: TransformerConfig, batch_size: int, device: torch.device, seed: int) -> Tensor:
    """Token chains that follow a fixed random successor table, with 10% random jumps: a task
    a language model can learn (the successor of a token is predictable most of the time)."""
    successor = torch.randperm(cfg.vocab, generator=generator(device, 4321), device=device)
    g = generator(device, seed)
    tokens = torch.empty(batch_size, cfg.seq_len + 1, dtype=torch.long, device=device)
    tokens[:, 0] = torch.randint(cfg.vocab, (batch_size,), generator=g, device=device)
    jumps = torch.rand(batch_size, cfg.seq_len, generator=g, device=device) < 0.1
    noise = torch.randint(cfg.vocab, (batch_size, cfg.seq_len), generator=g, device=device)
    for i in range(cfg.seq_len):
        tokens[:, i + 1] = torch.where(jumps[:, i], noise[:, i], successor[tokens[:, i]])
    return tokens


def build(cfg: TransformerConfig) -> Workload:
    sequences = functools.partial(_sequences, cfg)
    flops = training_flops_per_sample(cfg)
    return language_model("transformer", GPT(cfg), sequences, cfg.seq_len, flops)
