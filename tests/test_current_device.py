"""Each point runs with its own device current, and CUDA timing names its device's stream: a
point on cuda:N is timed on cuda:N, not on cuda:0."""

from __future__ import annotations

import contextlib

import pytest
import torch

from gpubench.config.spec import Budget, Point
from gpubench.probes.current_device import made_current
from gpubench.run.worker import run_point


def test_a_cpu_or_bare_cuda_device_changes_nothing() -> None:
    for name in ("cpu", "cuda"):
        assert isinstance(made_current(name), contextlib.nullcontext)


@pytest.mark.gpu
def test_cuda_n_is_current_inside_and_restored_after() -> None:
    last = torch.cuda.device_count() - 1
    before = torch.cuda.current_device()
    with made_current(f"cuda:{last}"):
        assert torch.cuda.current_device() == last
    assert torch.cuda.current_device() == before


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two GPUs"
)
def test_a_point_on_the_second_gpu_is_timed_there() -> None:
    # Timed on the wrong device, the events would bracket nothing (the work runs elsewhere)
    # and disagree with the synchronised wall clock.
    point = Point("cnn", "small", "cuda:1", "fp32", "sgd", 64)
    row = run_point(point, Budget(min_time_s=0.5, max_time_s=2.0))
    assert row["status"] == "ok", row["error"]
    assert torch.cuda.current_device() == 0
    agreement = abs(row["step_time_sum_s"] - row["wall_time_s"]) / row["wall_time_s"]
    assert agreement < 0.05
