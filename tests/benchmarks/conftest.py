"""The project's benchmark suite, timed through the same `gpubench` fixture users get.

The fixture and hooks are imported from the plugin rather than the plugin being registered, so
these tests run the same whether or not gpubench is installed with its pytest11 entry point
(when it is, these definitions shadow the plugin's, and the hooks are idempotent).

Test-only slowdown: GPUBENCH_TEST_EXTRA_FORWARDS=N makes every reference model run N extra
forward passes (without gradients) inside each training step, a regression that scales with the
model on any device. scripts/bench_gate.py uses it to show the compare-fail gate catching it.

Test-only budget: GPUBENCH_TEST_BENCH_SECONDS=S caps each benchmark's warm-up and its
measurement at S seconds each (and profiles no step) where the sweep's default budget would take
up to 3 + 2 seconds and a profiled step. tests/test_ci_gate.py sets it: it runs the documented
commands as written, and the gate's verdict (the fastest step against the baseline's) needs
the many sub-millisecond steps a fraction of a second holds, not the sweep's confidence interval.
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
from gpubench.config.spec import Budget
from gpubench.models.workload import Workload

SLOWDOWN_ENV = "GPUBENCH_TEST_EXTRA_FORWARDS"
BUDGET_ENV = "GPUBENCH_TEST_BENCH_SECONDS"


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


@pytest.fixture
def bench_budget() -> Budget | None:
    """The benchmarks' budget: None (the sweep's default) unless GPUBENCH_TEST_BENCH_SECONDS=S
    is set: then warm-up and measurement end after S seconds each (at least 6 measured steps,
    the fewest that give the median an interval), and no step is profiled."""
    seconds = float(os.environ.get(BUDGET_ENV, "0") or 0)
    if seconds <= 0:
        return None
    return Budget(
        warmup_min_s=0.0,
        warmup_max_s=seconds,
        min_time_s=0.0,
        max_time_s=seconds,
        profile_steps=0,
    )


@pytest.fixture(autouse=True)
def _release_cuda_memory() -> Iterator[None]:
    """Free the previous test's model before the next one resets the peak-memory counters."""
    yield
    if torch.cuda.is_available():
        gc.collect()
        torch.cuda.empty_cache()
