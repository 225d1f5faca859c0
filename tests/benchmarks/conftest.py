"""The project's benchmark suite, timed through the same `gpubench` fixture users get.

The fixture and hooks are imported from the plugin rather than the plugin being registered, so
these tests run the same whether or not gpubench is installed with its pytest11 entry point
(when it is, these definitions shadow the plugin's, and the hooks are idempotent).

Test-only slowdown: GPUBENCH_TEST_EXTRA_FORWARDS=N makes every reference model run N extra
forward passes (without gradients) inside each training step, a regression that scales with the
model on any device. scripts/bench_gate.py uses it to show the compare-fail gate catching it.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator

import pytest
import torch
from torch import Tensor, nn

from gpubench import models
from gpubench.cli.pytest_plugin import (  # noqa: F401  (fixture and hooks, re-exported for pytest
    gpubench,
    pytest_benchmark_update_machine_info,
    pytest_collection_modifyitems,
    pytest_runtest_setup,
)
from gpubench.models.workload import Workload

SLOWDOWN_ENV = "GPUBENCH_TEST_EXTRA_FORWARDS"


class ExtraForwards(nn.Module):
    """`inner`, with `extra` gradient-free forward passes before the real one."""

    def __init__(self, inner: nn.Module, extra: int) -> None:
        super().__init__()
        self.inner = inner
        self.extra = extra

    def forward(self, x: Tensor) -> Tensor:
        with torch.no_grad():
            for _ in range(self.extra):
                self.inner(x)
        return self.inner(x)


@pytest.fixture
def reference_workload() -> Callable[[str, str], Workload]:
    """Build a reference workload; slowed down when GPUBENCH_TEST_EXTRA_FORWARDS is set."""
    extra = int(os.environ.get(SLOWDOWN_ENV, "0") or 0)

    def build(name: str, size: str) -> Workload:
        workload = models.build(name, size)
        if extra > 0:
            workload.model = ExtraForwards(workload.model, extra)
        return workload

    return build


@pytest.fixture(autouse=True)
def _release_cuda_memory() -> Iterator[None]:
    """Free the previous test's model before the next one resets the peak-memory counters."""
    yield
    if torch.cuda.is_available():
        gc.collect()
        torch.cuda.empty_cache()
