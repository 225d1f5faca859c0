"""Synthetic batches, cycled from the device (`device` mode) or copied from pinned host memory
(`host` mode, so the cost of feeding the device is part of the measurement)."""

from __future__ import annotations

import itertools

import torch
from torch import Tensor

from gpubench.models.workload import Workload

# Distinct batches to cycle through: enough that no step reuses the previous step's batch, few
# enough that building them stays a small part of a point's time.
DISTINCT_BATCHES = 4


def unsupported_reason(mode: str, device: torch.device) -> str | None:
    if mode == "host" and device.type != "cuda":
        return "host data mode measures host-to-device copies; the CPU has none to measure"
    return None


class Batches:
    """An endless supply of `(inputs, targets)` on `device`. `held_bytes`: the bytes of the
    distinct batches it holds (on the host in `host` mode)."""

    def __init__(
        self,
        workload: Workload,
        batch_size: int,
        device: torch.device,
        mode: str = "device",
        seed: int = 0,
        count: int = DISTINCT_BATCHES,
        channels_last: bool = False,
    ) -> None:
        self.device = device
        self.mode = mode
        where = torch.device("cpu") if mode == "host" else device
        made = [workload.batch(batch_size, where, seed * 1000 + i) for i in range(count)]
        if channels_last:
            made = [(x.contiguous(memory_format=torch.channels_last), y) for x, y in made]
        if mode == "host":
            made = [(x.pin_memory(), y.pin_memory()) for x, y in made]
        self.held_bytes = sum(t.untyped_storage().nbytes() for batch in made for t in batch)
        self._cycle = itertools.cycle(made)

    def next(self) -> tuple[Tensor, Tensor]:
        x, y = next(self._cycle)
        if self.mode == "host":
            return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        return x, y
