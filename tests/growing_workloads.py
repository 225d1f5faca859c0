"""A workload whose memory grows with every step, for the max-batch tests (not part of gpubench):
a probe of a few steps fits a batch that a full measurement of more steps does not, as a real
model's probe can where the allocator fragments over a long run (issue 23)."""

from __future__ import annotations

import torch
from torch import nn

from gpubench import models
from gpubench.models.workload import Workload

# Bytes each sample leaves behind at every forward pass (kept until the process ends).
KEPT_PER_SAMPLE_STEP = 2**20


class _Growing(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.kept: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # address space, which --max-memory caps on the CPU, is taken without touching it
        self.kept.append(torch.empty(len(x), KEPT_PER_SAMPLE_STEP // 4))
        return self.inner(x)


def growing() -> Workload:
    """The tiny MLP, plus 1 MiB per sample held at every forward pass: after s steps at batch
    B it holds s x B MiB more than the MLP."""
    w = models.build("mlp", "tiny")
    w.model = _Growing(w.model)
    return w
