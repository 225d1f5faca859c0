"""Issue 28, item 8: a confirmation a GPU can hold. Candidates are held together only where
their measured peaks fit the device's free memory, else built, timed for a window and freed one
at a time; compiled candidates are compiled with static shapes; building and compiling are
outside the rounds' budget. On the CPU with tiny real models: which models are alive at each
window (weak references), the compile call's arguments, and the rounds a synthetic clock
allows."""

from __future__ import annotations

import dataclasses
import gc
import types
import weakref
from typing import Any

import pytest
import torch

from gpubench import models
from gpubench.config.spec import Point
from gpubench.harness import interleave, timing
from gpubench.harness.interleave import FREE_SHARE, fits_together
from gpubench.science import leaders

GiB = 2**30
POINTS = [Point("mlp", "tiny", "cpu", "fp32", "sgd", b) for b in (4, 16)]


def test_candidates_are_held_together_only_where_their_peaks_fit() -> None:
    assert fits_together("cpu", [None, None], None), "host memory: as the sweep's points"
    assert fits_together("cuda", [30 * GiB, 30 * GiB], 70 * GiB)
    assert fits_together("cuda:1", [30 * GiB, 30 * GiB], int(60 * GiB / FREE_SHARE) + 1)
    assert not fits_together("cuda", [65 * GiB, 60 * GiB], 78 * GiB)  # the H100's leaders
    assert not fits_together("cuda", [1 * GiB, None], 78 * GiB), "an unknown peak"
    assert not fits_together("cuda", None, 78 * GiB)


class _Alive:
    """Weak references to every model built, and how many were alive at each window."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.models: list[weakref.ref[torch.nn.Module]] = []
        self.at_windows: list[int] = []
        build, window = models.build, interleave._window

        def built(*args: Any, **kwargs: Any) -> Any:
            workload = build(*args, **kwargs)
            self.models.append(weakref.ref(workload.model))
            return workload

        def timed(*args: Any) -> float:
            self.at_windows.append(sum(ref() is not None for ref in self.models))
            return window(*args)

        monkeypatch.setattr(models, "build", built)  # as harness.step.build_workload calls it
        monkeypatch.setattr(interleave, "_window", timed)


@pytest.mark.parametrize("together", [True, False])
def test_one_at_a_time_no_two_candidates_are_alive_at_once(
    monkeypatch: pytest.MonkeyPatch, together: bool
) -> None:
    alive = _Alive(monkeypatch)
    monkeypatch.setattr(interleave, "fits_together", lambda *_: together)
    rounds = interleave.interleave(POINTS, 0.05, 0.005, leaders.MIN_ROUNDS, leaders.MIN_ROUNDS)
    assert rounds.together is together
    n = len(POINTS) * leaders.MIN_ROUNDS
    assert len(alive.at_windows) == n
    assert alive.at_windows == [len(POINTS) if together else 1] * n
    # built once each to warm up, then (one at a time) again for each of its windows
    assert len(alive.models) == len(POINTS) * (1 if together else 1 + leaders.MIN_ROUNDS)
    gc.collect()
    assert all(ref() is None for ref in alive.models), "nothing is held once it returns"
    # the outcome has the same form either way: every candidate, every round, samples/s
    assert [len(x) for x in rounds.samples_per_s] == [leaders.MIN_ROUNDS] * len(POINTS)
    assert all(x > 0 for series in rounds.samples_per_s for x in series)
    assert leaders.decide(rounds.samples_per_s).rounds == leaders.MIN_ROUNDS


def test_compiled_candidates_are_compiled_with_static_shapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[dict[str, Any]] = []

    def compile_(model: torch.nn.Module, **kwargs: Any) -> torch.nn.Module:
        calls.append(kwargs)
        return model  # eager: what is checked is how it was asked to compile

    monkeypatch.setattr(torch, "compile", compile_)
    monkeypatch.setattr(interleave, "fits_together", lambda *_: False)
    points = [dataclasses.replace(p, compile="compile") for p in POINTS]
    interleave.interleave(points, 0.02, 0.005, leaders.MIN_ROUNDS, leaders.MIN_ROUNDS)
    assert len(calls) == 2 * (1 + leaders.MIN_ROUNDS)
    assert all(kwargs.get("dynamic") is False for kwargs in calls)


def test_building_and_compiling_are_outside_the_rounds_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A synthetic clock: building a candidate costs 100 units, each step 1. The rounds a
    budget of 60 holds (windows of 2 steps and a switch-in step each: 6 a round) all run, one
    at a time too, though the set-up alone takes far longer than the budget and its deadline."""
    clock = [0.0]
    monkeypatch.setattr(interleave, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(timing, "_clock", lambda: clock[0])  # the warm-up's and windows'
    build, prepare = models.build, interleave.prepare

    def slow_build(*args: Any, **kwargs: Any) -> Any:
        clock[0] += 100.0
        return build(*args, **kwargs)

    def counted(*args: Any, **kwargs: Any) -> Any:
        prepared = prepare(*args, **kwargs)
        step = prepared.step

        def tick() -> Any:
            clock[0] += 1.0
            return step()

        return dataclasses.replace(prepared, step=tick)

    monkeypatch.setattr(models, "build", slow_build)
    monkeypatch.setattr(interleave, "prepare", counted)
    monkeypatch.setattr(interleave, "fits_together", lambda *_: False)
    rounds = interleave.interleave(POINTS, 60.0, 2.0, 6, 15, deadline_s=3 * 60.0)
    assert rounds.window_steps == [2, 2]
    assert [len(x) for x in rounds.samples_per_s] == [10, 10]  # 60 / 6
    assert rounds.setup_s >= 2 * 100.0 * (1 + 10)
    assert rounds.seconds - rounds.setup_s == pytest.approx(10 * 6)


def test_the_confirmation_passes_the_rows_peaks_and_records_how_they_were_held(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run.confirm hands the interleaving the sweep's measured peaks (which decide whether the
    candidates fit together) and records how they were held and what the set-up took (a
    worker's answer stands in for the GPU's)."""
    import json

    from gpubench.run import confirm, worker
    from gpubench.store.row import make_row

    peaks = {64: 40 * GiB, 128: 70 * GiB}
    rows = [
        make_row(
            Point("transformer", "base", "cuda", "bf16", "adamw", b),
            "ok",
            samples_per_s=300.0 + b / 64,
            step_time_s=b / 300.0,
            step_time_ci_rel=0.05,
            point_time_s=100.0,
            torch_peak_reserved_bytes=peaks[b],
        )
        for b in peaks
    ]
    calls: list[tuple[Any, ...]] = []

    def call(self: Any, c: Any, timeout_s: float | None) -> interleave.Rounds:
        calls.append(c.args)
        samples = [[300.0 + i for i in range(3)], [302.0 + i for i in range(3)]]
        return interleave.Rounds(samples, [2, 1], 1000.0, 1010.0, 0.0, False, together=False)

    monkeypatch.setattr(worker.WorkerRunner, "call", call)
    out = confirm.confirm(tmp_path, rows)
    # the same rounds in each fresh process
    assert len(calls) == leaders.PROCESSES and all(c == calls[0] for c in calls)
    points, *_, resident = calls[0]
    assert [p.batch_size for p in points] == [128, 64] and resident == [70 * GiB, 40 * GiB]
    (record,) = out.partitions
    assert record.status == "confirmed" and record.resident == "one at a time"
    assert record.setup_s is not None and record.setup_s >= 1000.0 * leaders.PROCESSES
    assert json.loads((tmp_path / "confirm.json").read_text())["partitions"][0]["resident"]
