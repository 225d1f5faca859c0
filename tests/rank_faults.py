"""Workloads that fail on one rank of a parallel point only, and a rank function that returns
DDP's gradients, for the tests of parallel points (not part of gpubench). Rank 0 trains on and
then waits in a collective for the failed rank, as it would in a real failure."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from fault_workloads import _wrap

from gpubench import models
from gpubench.config.spec import Point
from gpubench.harness import parallel
from gpubench.models.workload import Workload


def _on_rank1(fault: Callable[[], None]) -> Workload:
    def maybe() -> None:
        if dist.is_initialized() and dist.get_rank() == 1:
            fault()

    return _wrap(maybe)


def _raise_value() -> None:
    raise ValueError("injected failure on rank 1")


def _raise_memory() -> None:
    raise MemoryError("injected: can't allocate memory")


def raises() -> Workload:
    return _on_rank1(_raise_value)


def oom() -> Workload:
    return _on_rank1(_raise_memory)


def killed() -> Workload:
    return _on_rank1(lambda: os.kill(os.getpid(), signal.SIGKILL))


def hangs() -> Workload:
    return _on_rank1(lambda: time.sleep(10**6))


def ddp_gradients(
    rank: int, world: int, init_method: str, timeout_s: float, batch: int
) -> list[Any]:
    """Rank `rank`'s gradients (numpy arrays: a tensor would travel as shared memory that ends
    with this process) after one DDP step on its slice of a shared batch of `batch` samples
    (the harness's own wrapping), in parameter order."""
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", batch, parallel="ddp", nproc=world)
    parallel.init_group(point, rank, world, init_method, timeout_s)  # the launch leaves it
    torch.manual_seed(0)
    workload = models.build("mlp", "tiny")
    model = parallel.wrap(workload.model, "ddp", torch.device("cpu"))
    x, y = workload.batch(batch, "cpu", seed=7)
    share = batch // world
    part = slice(rank * share, (rank + 1) * share)
    workload.loss(model(x[part]), y[part]).backward()
    return [p.grad.numpy().copy() for p in model.parameters()]  # type: ignore[union-attr]


class _SlowFirst:
    """Sleeps `base` seconds each call, and for each of `seconds` in turn, one a call, that
    much more."""

    def __init__(self, seconds: list[float], base: float = 0.0) -> None:
        self.left = list(seconds)
        self.base = base

    def __call__(self) -> None:
        extra = self.left.pop(0) if self.left else 0.0
        if extra + self.base:
            time.sleep(extra + self.base)


def settles_late() -> Workload:
    """Rank 1's forward passes sleep 20 ms each, the first 10 of them 400 ms more, then 30%
    less each time; rank 0's steps, which wait for rank 1's in each all-reduce, settle with
    them. Three steps in a row (base + e, + 0.7e, + 0.49e) disagree by more than 10% while
    e > 0.23 x the plain step: the last three extras (33, 23 and 16 ms) keep them apart for
    plain steps up to 140 ms, a loaded machine's (80 ms extras kept them apart only to 29 ms,
    and a loaded run ended the warm-up one step early). The 20 ms sleep makes the settled
    steps agree: a plain step of the tiny MLP (about 1 ms) on a busy machine seldom had three
    in a row within 10%, and the warm-up then ran to its time limit."""
    return _on_rank1(_SlowFirst([0.4 * 0.7**k for k in range(10)], base=0.02))
