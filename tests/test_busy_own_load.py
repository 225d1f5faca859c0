"""Issue 28: a point beside a process of gpubench's own kind (the NVML sampling process, here
burning half a core and more) is not busy; a point beside a foreign process that takes its
cores is. And the rule itself on the H100's rows: a CUDA point needs one core.

The own case replaces the machine's busy-time counter by one that adds up only this process
and the children it reaped (os.times, independent of gpubench's process tree), so that the
other jobs of a shared test machine do not enter it: whatever the tree's accounting misses of
the sampler reads as other load.

tests/data/h100/quick1-load.jsonl: the busy fields of ../shared/fixtures/h100-20261124/quick1
(`python -m gpubench sweep` on an H100 host of 16 cores, main at b13b5bb), one line per row,
with env.json's core count."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from own_load import cpu_s, foreign_burner

from gpubench.config.spec import Budget, Point
from gpubench.harness import observation
from gpubench.probes import load
from gpubench.probes.sampler_process import ProcessSampler
from gpubench.run.worker import WorkerRunner, run_point

H100 = Path(__file__).parent / "data" / "h100" / "quick1-load.jsonl"
FIRST_BURN_S = 1.0  # the sampling process's CPU seconds before its first reading returns
EACH_BURN_S = 0.01  # per reading, then 10 ms of wait: half a core


def _point() -> Point:
    # every core of the machine: any load of others beyond a quarter core contends it
    return Point("mlp", "tiny", "cpu", "fp32", "sgd", 4, threads=load.cores())


BUDGET = dataclasses.replace(Budget.fixed(20, warmup_steps=2), profile_steps=0)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
def test_a_point_beside_its_own_burning_sampler_is_not_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    samplers: list[ProcessSampler] = []

    def sampler(device: object) -> ProcessSampler:
        s = ProcessSampler("own_load:burning_reader", (FIRST_BURN_S, EACH_BURN_S))
        samplers.append(s)
        return s

    def machine_busy_s() -> float:
        # this process, and the children it has reaped: the sampling process starts inside
        # the window and is reaped before the window ends
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    monkeypatch.setattr(observation, "nvml_sampler", sampler)
    monkeypatch.setattr(load, "_machine_busy_s", machine_busy_s)
    before = os.times()
    row = run_point(_point(), BUDGET)
    after = os.times()
    assert row["status"] == "ok", row["error"]
    assert len(samplers) == 1 and samplers[0].summary is not None  # it sampled the window
    sampler_s = after.children_user + after.children_system
    sampler_s -= before.children_user + before.children_system
    assert sampler_s >= FIRST_BURN_S  # the sampler burnt 1 s and more inside the window
    # none of it is others': counted as others, it would read at least 1 s over the window's
    # seconds (20 tiny steps: a few seconds on a crowded machine), 0.3 where this was written;
    # a clock tick (0.01 s) of rounding between the two counters reads a hundredth or less
    assert row["other_load_cores"] is not None and row["other_load_cores"] < 0.05
    assert row["busy"] is False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
def test_a_point_beside_foreign_spinners_is_busy(tmp_path: Path) -> None:
    """Two daemons outside gpubench's tree spin on the cores the point's threads use; the point
    runs in a worker of the fork server, as a sweep's do."""
    runner = WorkerRunner()
    try:
        # the worker first (the fork server imports torch): the spinners spin for the point alone
        assert runner.run(_point(), Budget.fixed(1, warmup_steps=1))["status"] == "ok"
        with (
            foreign_burner(-1, tmp_path / "a") as first,
            foreign_burner(-1, tmp_path / "b") as second,
        ):
            _wait_spinning(first)
            _wait_spinning(second)
            row = runner.run(_point(), BUDGET)
    finally:
        runner.close()
    assert row["status"] == "ok", row["error"]
    assert row["other_load_cores"] > load.SPARE_CORES
    assert row["busy"] is True


def _wait_spinning(pid: int, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while cpu_s(pid) < 0.05:
        assert time.monotonic() < end, f"process {pid} does not spin"
        time.sleep(0.01)


def _h100_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in H100.read_text().splitlines()]


def test_the_h100_cuda_rows_are_not_contended_by_half_a_core() -> None:
    """quick1 on the H100 (16 cores): every CUDA row read 0.40-0.69 cores of "other" load (its
    own sampler's, then counted) and was marked busy against its 16 torch threads. A CUDA point
    needs the one core of the thread that drives the GPU."""
    rows = _h100_rows()
    cuda = [r for r in rows if r["device"] == "cuda"]
    assert len(cuda) == 36 and all(r["busy"] is True for r in cuda)
    for r in cuda:
        needed = load.needed_cores(r["device"], r["torch_threads"])
        assert needed == 1
        assert load.contended(r["other_load_cores"], needed, r["cores"]) is False
    # CPU rows keep their rule: torch's 16 threads on 16 cores leave none free
    cpu = [r for r in rows if r["device"] == "cpu"]
    assert len(cpu) == 36
    for r in cpu:
        needed = load.needed_cores(r["device"], r["torch_threads"])
        assert needed == r["torch_threads"] == 16
        assert load.contended(r["other_load_cores"], needed, r["cores"]) is r["busy"]
