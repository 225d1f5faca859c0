"""Gradient accumulation across ranks (issue 25): two gloo ranks, DDP and FSDP2. Every
micro-batch but the last runs without gradient synchronisation, so the gradient-reducing
collectives happen once per optimizer step, and the gradients are those of one whole batch."""

from __future__ import annotations

import numpy as np
import pytest

from gpubench.config.spec import Budget, Point
from gpubench.run.ranks import launch, run_parallel_point

TIMEOUT_S = 180  # generous: the machine the tests run on may be busy


@pytest.fixture(autouse=True, scope="module")
def _fork_server() -> None:
    """Ranks come from the workers' fork server: start it once, before the tests."""
    import os

    from gpubench.run.worker import context

    warm = context().Process(target=os.getpid)
    warm.start()
    warm.join()


@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_ranks_reduce_gradients_once_per_update(mode: str) -> None:
    import accumulate_ranks

    # 8 samples per rank: one pass of 8, or 4 micro-batches of 2
    once = launch(accumulate_ranks.accumulated_step, (mode, 1, 8), nproc=2, timeout_s=TIMEOUT_S)
    four = launch(accumulate_ranks.accumulated_step, (mode, 4, 8), nproc=2, timeout_s=TIMEOUT_S)
    for whole, accumulated in zip(once, four, strict=True):
        assert whole["collectives"], "no gradient reduction seen: the count would prove nothing"
        # the same reductions, once: not one per micro-batch
        assert sorted(accumulated["collectives"]) == sorted(whole["collectives"])
        for got, want in zip(accumulated["grads"], whole["grads"], strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_parallel_row_says_its_ranks_micro_batch() -> None:
    point = Point(
        "transformer", "tiny", "cpu", "fp32", "sgd", 8, parallel="ddp", nproc=2, scaling="strong"
    )
    point = Point(**{**point.to_dict(), "accumulate": 2, "checkpoint": "blocks"})
    row = run_parallel_point(point, Budget.fixed(2, warmup_steps=1), timeout_s=TIMEOUT_S)
    assert row["status"] == "ok", row["error"]
    # the global batch 8 split over 2 ranks, each in 2 micro-batches of 2
    assert (row["per_process_batch_size"], row["micro_batch_size"]) == (4, 2)
    assert (row["accumulation_steps"], row["checkpoint"]) == (2, "blocks")
    assert row["samples_per_s"] == pytest.approx(8 / row["step_time_s"])
