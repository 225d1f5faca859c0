"""Ground truth for the loader data mode (issue 31), on the CPU with tiny real data: a transform
whose cost is a controlled sleep makes the step input-bound and more workers raise its samples/s;
the same model fed from the device is not input-bound."""

from __future__ import annotations

import re

import pytest

from gpubench.config.spec import Budget, Point
from gpubench.harness.point import measure_point
from gpubench.science.bottleneck import classified
from gpubench.science.input_bound import INPUT_WAIT_SHARE, input_lines

BUDGET = Budget.fixed(steps=6, warmup_steps=2)


def _point(device: str = "cpu", **loader: object) -> Point:
    fields = dict(data="loader", pin_memory=False, loader="loader_datasets:slow") | loader
    return Point("mlp", "tiny", device, "fp32", "sgd", 8, **fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, object]]:
    budget = Budget(**{**BUDGET.__dict__, "profile_steps": 0})
    at = {
        "0 workers": _point(loader_workers=0),
        "4 workers": _point(loader_workers=4, prefetch=2, persistent_workers=True),
        "device": Point("mlp", "tiny", "cpu", "fp32", "sgd", 8),
    }
    return {k: classified(measure_point(p, budget)) for k, p in at.items()}


def test_a_slow_transform_is_input_bound_with_its_evidence(rows: dict) -> None:
    row = rows["0 workers"]
    assert row["status"] == "ok", row["error"]
    # 8 samples of 20 ms of sleep per batch against a step of a tiny MLP: the wait dominates
    assert row["input_wait_share"] >= INPUT_WAIT_SHARE
    assert row["bottleneck"] == "input"
    assert "waits" in row["bottleneck_evidence"] and "pipeline alone" in row["bottleneck_evidence"]
    assert len(row["input_wait_times_s"]) == row["steps_measured"]
    # the loading ran in this process at 0 workers: its CPU time is the training thread's
    assert row["loader_cpu_s_per_step"] > 0


def test_more_workers_raise_the_samples_per_s_and_the_lever_says_so(rows: dict) -> None:
    slow, fast = rows["0 workers"], rows["4 workers"]
    assert fast["status"] == "ok", fast["error"]
    # four workers sleep at once where the training process slept alone: 4x in principle;
    # 1.5x leaves room for a machine as busy as this one gets
    assert fast["samples_per_s"] > 1.5 * slow["samples_per_s"]
    assert fast["pipeline_samples_per_s"] > 1.5 * slow["pipeline_samples_per_s"]
    lines = input_lines(fast, [slow, fast], margin=0.03)
    assert any(re.match(r"4 workers: x[\d.,]+ the samples/s of 0 workers", line) for line in lines)


def test_the_same_model_on_device_data_is_not_input_bound(rows: dict) -> None:
    row = rows["device"]
    assert row["status"] == "ok", row["error"]
    assert row["bottleneck"] != "input"
    assert row["input_wait_share"] is None and row["loader_workers"] is None


@pytest.mark.gpu
def test_on_cuda_the_wait_holds_the_copy_and_pinned_batches_arrive() -> None:
    """The CUDA path: batches pinned by the loader, copied without blocking, each copy timed by
    CUDA events into its step's wait; the slow transform is input-bound there too."""
    budget = Budget(**{**BUDGET.__dict__, "profile_steps": 0})
    point = Point(
        "cnn", "small", "cuda", "fp32", "sgd", 32, data="loader", loader_workers=0,
        pin_memory=True,
    )  # fmt: skip
    row = classified(measure_point(point, budget))
    assert row["status"] == "ok", row["error"]
    assert 0 < row["input_wait_share"] <= 1 and row["input_wait_s"] > 0
    assert row["pipeline_samples_per_s"] > 0 and row["step_timer"] == "cuda_event"
    slow = classified(
        measure_point(_point(device="cuda", pin_memory=True, loader_workers=0), budget)
    )
    assert slow["bottleneck"] == "input", slow["bottleneck_evidence"]
