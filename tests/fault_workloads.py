"""Workloads that fail on purpose, for the tests of worker isolation (not part of gpubench).

Each is a tiny MLP whose forward pass misbehaves for real: it segfaults its process, hangs,
raises, or (`hungry`) holds activations large enough that a memory cap is reached at a modest
batch size. Suites name them as `fault_workloads:segfault` etc.; the tests put this folder on
sys.path (and PYTHONPATH for subprocesses), so worker processes can import them too.

A sweep checks each model with one training step before it starts (gpubench.run.preflight), so
a model that fails at its first step never reaches the sweep's points. The `*_later` variants
misbehave from their second forward pass on: they pass that check, and every point of a sweep
(which warms up before it measures) meets the fault.
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


class _Later:
    """`fault` from the second call on; the first call does nothing."""

    def __init__(self, fault: Callable[[], None]) -> None:
        self.fault = fault
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls > 1:
            self.fault()


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


def segfault_later() -> Workload:
    """Its first forward pass trains; the second kills its own process with SIGSEGV."""
    return _wrap(_Later(lambda: os.kill(os.getpid(), signal.SIGSEGV)))


def hang_later() -> Workload:
    """Its first forward pass trains; the second never returns."""
    return _wrap(_Later(lambda: time.sleep(10**6)))


def _asleep_at(call: int) -> Callable[[], None]:
    """A fault that, at its `call`-th call only, creates the file named by
    $GPUBENCH_TEST_SLOW_MARKER (if set), then sleeps $GPUBENCH_TEST_SLOW_S seconds (default 3)."""
    calls: list[bool] = []

    def fault() -> None:
        calls.append(True)
        if len(calls) == call:
            marker = os.environ.get("GPUBENCH_TEST_SLOW_MARKER")
            if marker:
                Path(marker).touch()
            time.sleep(float(os.environ.get("GPUBENCH_TEST_SLOW_S", "3")))

    return fault


def slow() -> Workload:
    """Its second forward pass sleeps ($GPUBENCH_TEST_SLOW_S seconds, default 3), then it trains
    like the tiny MLP: a point that is surely in flight when a test interrupts the sweep, and
    that then finishes. When it starts sleeping it creates the file named by
    $GPUBENCH_TEST_SLOW_MARKER, if set. (Its first pass is the sweep's check step, which runs
    before the sweep starts: it must not sleep there.)"""
    return _wrap(_asleep_at(2))


def slow_check() -> Workload:
    """Its first forward pass, the sweep's check step before the folder is opened, sleeps as
    slow()'s second does: a sweep surely not yet at its first point when a test interrupts it.
    Later passes train like the tiny MLP."""
    return _wrap(_asleep_at(1))


def _raise() -> None:
    raise ValueError("injected failure in forward")


def raises() -> Workload:
    """Its first forward pass raises ValueError."""
    return _wrap(_raise)


def raises_later() -> Workload:
    """Its first forward pass trains; the second raises ValueError."""
    return _wrap(_Later(_raise))


class _From:
    """`fault` from call `first` on in a process; the calls before it do nothing."""

    def __init__(self, fault: Callable[[], None], first: int) -> None:
        self.fault, self.first, self.calls = fault, first, 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls >= self.first:
            self.fault()


def raises_when_measured() -> Workload:
    """Trains its first 8 forward passes in a process (a check step, a memory probe's steps),
    then raises ValueError: every measured point fails."""
    return _wrap(_From(_raise, 9))


def _pause_then_raise() -> None:
    time.sleep(0.2)
    raise ValueError("injected failure after a pause")


def raises_after_a_pause() -> Workload:
    """Its first forward pass sleeps 0.2 s, then raises ValueError: an error row whose worker
    ran long enough for the load around it to be measured (probes.load.OtherLoad)."""
    return _wrap(_pause_then_raise)


class _Boom(nn.Module):
    """A user's model with a bug in its forward pass (issue 22's audit)."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("boom-4711")


def boom() -> Workload:
    """The tiny MLP's task, with a model whose forward raises RuntimeError("boom-4711")."""
    w = models.build("mlp", "tiny")
    w.model = _Boom()
    return w


def boom_when_told() -> Workload:
    """The tiny MLP where $GPUBENCH_TEST_BOOM is unset; where it is set, boom()'s model (as
    when a user's code changed between a sweep and its resumption)."""
    return boom() if os.environ.get("GPUBENCH_TEST_BOOM") else models.build("mlp", "tiny")


class _OnCuda(nn.Module):
    """Adds a tensor made on CUDA: a model that trains on a CUDA device, and on no other."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) + torch.zeros(1, device="cuda")


def cuda_only() -> Workload:
    """The tiny MLP, whose forward pass fails on any device but CUDA."""
    w = models.build("mlp", "tiny")
    w.model = _OnCuda(w.model)
    return w


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


def hang_building() -> Workload:
    """Never returns: it hangs while being built."""
    time.sleep(10**6)
    raise AssertionError("unreachable")


def die_building() -> Workload:
    """Kills its own process while being built."""
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")
