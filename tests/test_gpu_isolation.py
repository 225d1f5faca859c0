"""Out-of-memory handling and max-batch on CUDA (skipped without a GPU)."""

from __future__ import annotations

import pytest

from gpubench.config.spec import Budget, Point
from gpubench.run import batch_search, maxbatch
from gpubench.run.worker import WorkerRunner

pytestmark = pytest.mark.gpu
CAP = 512 * 2**20  # the caching allocator's share of the GPU, bytes


def _point(batch: int, optimizer: str = "adamw") -> Point:
    return Point("transformer", "small", "cuda", "fp32", optimizer, batch)


def test_cuda_oom_is_a_row_and_the_next_point_runs() -> None:
    runner = WorkerRunner(max_memory=CAP, point_timeout_s=300)
    try:
        oom = runner.run(_point(2**14), Budget.fixed(2, 1))
        ok = runner.run(_point(8), Budget.fixed(2, 1))
    finally:
        runner.close()
    assert oom["status"] == "oom" and "OutOfMemoryError" in oom["error"], oom["error"]
    assert ok["status"] == "ok" and ok["torch_peak_allocated_bytes"] <= CAP
    assert len(runner.startup_s) == 2, "the worker that ran out of memory was replaced"


def test_max_batch_on_cuda_finds_a_confirmed_boundary() -> None:
    found = maxbatch.find(_point(1), CAP, 300, start=64, confirm_budget=Budget.fixed(10, 2))
    assert found.stopped is None and found.largest >= 64 and not found.ceiling_reached
    confirmed = [p for p in found.probes if p.phase == "confirm"]
    assert confirmed[-1].fits and confirmed[-1].batch_size == found.largest
    # the bracket [largest, smallest_failed) is closed to the search's resolution (8 samples
    # or 2%, not 1: no --exact), and its top is a batch that ran out of memory
    failed = {p.batch_size for p in found.probes if p.status == "oom"}
    assert found.smallest_failed in failed
    assert found.smallest_failed - found.largest <= batch_search.resolution(found.largest, False)
    assert found.resolution == found.smallest_failed - found.largest
