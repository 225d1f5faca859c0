"""A point's `busy` is about its timed steps: load that other processes put on the machine
during the warm-up only (torch.compile's compile workers, which are child processes) does not
mark it, load during the measured windows does. The machine's busy-time counter is replaced by
a synthetic one, so what counts as others' load is exactly what the workload adds."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from gpubench import models
from gpubench.config.spec import Budget, Point
from gpubench.models.workload import Workload
from gpubench.probes import load, process_tree
from gpubench.run.worker import run_point

OTHERS_S = [0.0]  # the synthetic counter's share: seconds of CPU others used so far


class _Loaded(nn.Module):
    """A tiny MLP whose forward adds 50 s of others' CPU time on the calls `when` picks."""

    def __init__(self, inner: nn.Module, when: str) -> None:
        super().__init__()
        self.inner, self.when, self.calls = inner, when, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.when == "always" or self.calls == 1:
            OTHERS_S[0] += 50.0
        return self.inner(x)


def _workload(when: str) -> Workload:
    w = models.build("mlp", "tiny")
    w.model = _Loaded(w.model, when)
    return w


def first_step_only() -> Workload:
    return _workload("first")


def every_step() -> Workload:
    return _workload("always")


@pytest.fixture(autouse=True)
def _synthetic_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    OTHERS_S[0] = 0.0
    monkeypatch.setattr(load, "_machine_busy_s", lambda: process_tree.tree_cpu_s() + OTHERS_S[0])


def _row(model: str) -> dict[str, object]:
    # 400 steps: a measured window long enough (over load._MIN_WINDOW_S) to tell its load
    point = Point(f"test_busy_window:{model}", "tiny", "cpu", "fp32", "sgd", 4, threads=1)
    return run_point(point, dataclasses.replace(Budget.fixed(400, warmup_steps=2), profile_steps=0))


def test_load_during_the_warm_up_only_does_not_mark_the_point_busy() -> None:
    row = _row("first_step_only")
    assert row["status"] == "ok" and row["steps_measured"] == 400
    assert row["other_load_cores"] is not None and row["other_load_cores"] < load.SPARE_CORES
    assert row["busy"] is False


def test_load_during_the_measured_steps_marks_it_busy() -> None:
    row = _row("every_step")
    assert row["status"] == "ok"
    assert row["other_load_cores"] > load.cores() and row["busy"] is True
