"""Dataset factories for the loader data mode's tests (not part of gpubench): suites and points
name them as `loader = "loader_datasets:slow"` etc. The tests put this folder on sys.path (and
PYTHONPATH for worker processes), as for fault_workloads.

Each makes real samples of the workload's input shape on the CPU; `slow` sleeps a fixed time
per sample (a transform whose cost is controlled, not this machine's speed); `crashing` raises
in a loader worker, never in the training process itself."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from gpubench.data.pipelines import LoaderSettings
from gpubench.models.workload import Workload

SLOW_S = 0.02  # seconds of "transform" per sample
SAMPLES = 64


class _Samples(Dataset[tuple[torch.Tensor, int]]):
    def __init__(
        self, workload: Workload, sleep_s: float = 0.0, crash: bool = False, hungry: bool = False
    ) -> None:
        x, _ = workload.batch(1, "cpu", 0)
        self.shape = tuple(x.shape[1:])
        self.sleep_s, self.crash, self.hungry = sleep_s, crash, hungry

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if self.crash and get_worker_info() is not None:
            raise ValueError(f"sample {i} is corrupt (a crash in a loader worker)")
        if self.hungry and get_worker_info() is not None:
            # what a worker meets past the memory cap: the allocation fails in the worker
            raise MemoryError(f"cannot allocate memory for sample {i}")
        time.sleep(self.sleep_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.shape, generator=g), i % 10


def slow(workload: Workload, settings: LoaderSettings) -> Dataset[Any]:
    return _Samples(workload, sleep_s=SLOW_S)


def crashing(workload: Workload, settings: LoaderSettings) -> Dataset[Any]:
    return _Samples(workload, crash=True)


def hungry(workload: Workload, settings: LoaderSettings) -> Dataset[Any]:
    return _Samples(workload, hungry=True)


def own_loader(workload: Workload, settings: LoaderSettings) -> DataLoader[Any]:
    """A user's whole DataLoader, used as it is."""
    return DataLoader(_Samples(workload), batch_size=settings.batch_size, drop_last=True)


def not_data(workload: Workload, settings: LoaderSettings) -> object:
    return 42


class _Hangs(Dataset[tuple[torch.Tensor, int]]):
    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(3600)  # a worker stuck on a sample (a dead network mount, say)
        raise AssertionError("unreachable")


def hanging(workload: Workload, settings: LoaderSettings) -> DataLoader[Any]:
    """A DataLoader whose one worker never delivers, with a 2-second timeout of its own."""
    return DataLoader(_Hangs(), batch_size=settings.batch_size, num_workers=1, timeout=2)


class _Stream(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """20 samples a pass and no length: an epoch ends only when the iterator does."""

    def __init__(self, workload: Workload) -> None:
        self.samples = _Samples(workload)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return (self.samples[i] for i in range(20))


def stream(workload: Workload, settings: LoaderSettings) -> DataLoader[Any]:
    return DataLoader(_Stream(workload), batch_size=settings.batch_size, drop_last=True)
