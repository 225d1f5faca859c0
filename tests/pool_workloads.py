"""Workloads for the device pool's tests (not part of gpubench): each names, in its Workload's
name (a row's `workload`), the CUDA_VISIBLE_DEVICES its worker saw; `visible_slow` also sleeps
at its second forward pass (a measured point surely in flight when a test stops the sweep);
`killed_at_3`'s worker is killed with SIGKILL in the middle of its point of batch 3."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import torch
from fault_workloads import _wrap
from torch import nn

from gpubench import models
from gpubench.models.workload import Workload


def _seen() -> str:
    return f"visible={os.environ.get('CUDA_VISIBLE_DEVICES')}"


def visible() -> Workload:
    """The tiny MLP, named after the CUDA_VISIBLE_DEVICES of the process that built it."""
    w = models.build("mlp", "tiny")
    w.name = _seen()
    return w


HELD_S = 2.0  # how long visible_held's point sleeps while its file exists


def visible_held(hold: str) -> Workload:
    """visible(), whose second forward pass (its point's warm-up: the first is the sweep's
    check step) sleeps HELD_S seconds where the file `hold` exists then. `hold` is a model
    option, read in the worker, since the fork server's environment is the one it started
    with: a test holds a sweep's points in flight, then lets its resume run unheld."""
    calls: list[bool] = []

    def fault() -> None:
        calls.append(True)
        if len(calls) == 2 and Path(hold).exists():
            time.sleep(HELD_S)

    w = _wrap(fault)
    w.name = _seen()
    return w


class _KilledAt:
    """SIGKILL to its own process at a forward pass of `batch` samples after the first call (the
    sweep's check step): the worker dies in the middle of that point."""

    def __init__(self, batch: int) -> None:
        self.batch, self.calls = batch, 0

    def __call__(self, n: int) -> None:
        self.calls += 1
        if self.calls > 1 and n == self.batch:
            os.kill(os.getpid(), signal.SIGKILL)


class _Killer(nn.Module):
    def __init__(self, inner: nn.Module, fault: _KilledAt) -> None:
        super().__init__()
        self.inner, self.fault = inner, fault

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.fault(len(x))
        return self.inner(x)


def killed_at_3() -> Workload:
    """visible()'s MLP whose worker is killed (SIGKILL) while it measures a batch of 3."""
    w = visible()
    w.model = _Killer(w.model, _KilledAt(3))
    return w


def visible_logged(log: str) -> Workload:
    """visible(), which also appends the CUDA_VISIBLE_DEVICES its process saw to the file `log`
    (a model option: the fork server's environment is the one it started with), a line per
    build (the model checks, each point, each confirmation worker's candidates)."""
    w = visible()
    with open(log, "a") as f:
        f.write(w.name + "\n")
    return w
