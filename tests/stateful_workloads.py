"""A workload whose training state is large beside its activations, for the tests of
batch_sizes = "auto" per parallel layout (not part of gpubench): what DDP adds to a rank and
FSDP shards away is a large share of its memory."""

from __future__ import annotations

import torch
from fault_workloads import _Hungry
from torch import nn

from gpubench import models
from gpubench.models.workload import Workload

STATE_PARAMETERS = 12 * 2**20  # fp32: 48 MiB of parameters, as much gradient, 96 MiB of AdamW


class _Stateful(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hungry = _Hungry()
        self.state = nn.Parameter(torch.zeros(STATE_PARAMETERS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hungry(x) + self.state.sum()  # every parameter gets a gradient


def stateful() -> Workload:
    """`fault_workloads:hungry` (about 4 MiB of activations a sample) with 48 MiB more
    parameters: under AdamW about 192 MiB of training state."""
    w = models.build("mlp", "tiny")
    w.model = _Stateful()
    w.flops_per_sample = None
    return w
