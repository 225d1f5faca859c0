"""Workloads that fail on purpose, for the tests of worker isolation (not part of gpubench).

Each is a tiny MLP whose forward pass misbehaves for real: it segfaults its process, hangs,
raises, or (`hungry`) holds activations large enough that a memory cap is reached at a modest
batch size. Suites name them as `fault_workloads:segfault` etc.; the tests put this folder on
sys.path (and PYTHONPATH for subprocesses), so worker processes can import them too.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from gpubench import models
from gpubench.models.workload import Workload


class _Faulty(nn.Module):
    def __init__(self, inner: nn.Module, fault: Callable[[], None]) -> None:
        super().__init__()
        self.inner = inner
        self.fault = fault

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.fault()
        return self.inner(x)


def _wrap(fault: Callable[[], None]) -> Workload:
    w = models.build("mlp", "tiny")
    w.model = _Faulty(w.model, fault)
    return w


def segfault() -> Workload:
    """Its first forward pass kills its own process with SIGSEGV."""
    return _wrap(lambda: os.kill(os.getpid(), signal.SIGSEGV))


def hang() -> Workload:
    """Its first forward pass never returns."""
    return _wrap(lambda: time.sleep(10**6))


def slow() -> Workload:
    """Its first forward pass sleeps ($GPUBENCH_TEST_SLOW_S seconds, default 3), then it trains
    like the tiny MLP: a point that is surely in flight when a test interrupts the sweep, and
    that then finishes. When it starts sleeping it creates the file named by
    $GPUBENCH_TEST_SLOW_MARKER, if set."""
    slept: list[bool] = []

    def once() -> None:
        if not slept:
            slept.append(True)
            marker = os.environ.get("GPUBENCH_TEST_SLOW_MARKER")
            if marker:
                Path(marker).touch()
            time.sleep(float(os.environ.get("GPUBENCH_TEST_SLOW_S", "3")))

    return _wrap(once)


def _raise() -> None:
    raise ValueError("injected failure in forward")


def raises() -> Workload:
    """Its first forward pass raises ValueError."""
    return _wrap(_raise)


class _Picky(nn.Module):
    """Raises for a batch of more than 4 samples: an error that is no memory limit."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if len(x) > 4:
            raise ValueError(f"injected failure at a batch of {len(x)}")
        return self.inner(x)


def picky() -> Workload:
    """Trains like the tiny MLP up to a batch of 4, and raises above it."""
    w = models.build("mlp", "tiny")
    w.model = _Picky(w.model)
    return w


class _Hungry(nn.Module):
    """Cheap to compute, costly to hold: each sample's 64 inputs are repeated to 256 Ki floats
    (1 MiB) twice over and kept for the backward pass, about 4 MiB per sample at the peak."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(x.flatten(1).repeat(1, 4096) * self.scale)
        return self.head(h.view(len(x), 4096, 64).mean(1))


def hungry() -> Workload:
    """A tiny MLP's task with about 4 MiB of activations per sample: a memory cap a few hundred
    MiB above the worker's footprint is reached near B=100, in well under a second a step."""
    w = models.build("mlp", "tiny")
    w.model = _Hungry()
    w.flops_per_sample = None
    return w
