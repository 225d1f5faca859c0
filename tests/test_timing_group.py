"""A parallel point's ranks measure through the single process's windowed loop, taking each of
its decisions together (timing.Group): driven by a clock the test controls and a group whose
other rank is programmed."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from gpubench.config.spec import Budget
from gpubench.harness import timing

CPU = torch.device("cpu")


class _Clock:
    """A host clock that moves only when a fake step 'runs' (1 ms)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def step(self) -> float:
        self.now += 0.001
        return 0.0


class _OtherRank:
    """The group's `largest` where the other rank asks for windows of at most 3 steps, sees a
    slow plateau of 3 steps in the second window, and wants 2 windows more than this one."""

    def __init__(self) -> None:
        self.plateaus = itertools.chain([0.0, 3.0], itertools.repeat(0.0))
        self.extra = 2
        self.measuring = False

    def __call__(self, values: list[float]) -> list[float]:
        if len(values) == 2:  # a window's decision: [go on, late]
            go_on = values[0] or self.extra > 0
            self.extra -= not values[0]
            return [float(go_on), values[1]]
        if values[0] < 0:  # the next window's steps, negated (Group.least)
            self.measuring = True
            return [max(values[0], -3.0)]
        if self.measuring:  # a window's plateau
            return [max(values[0], next(self.plateaus))]
        return values  # the warm-up's decisions: this rank's own


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    c = _Clock()
    monkeypatch.setattr(timing, "_clock", c)
    return c


def test_every_rank_takes_the_groups_window_plateau_and_stop(
    clock: _Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    windows: list[int] = []
    timed = timing.time_window

    def recorded(step: object, device: torch.device, n: int) -> timing.Window:
        windows.append(n)
        return timed(step, device, n)  # type: ignore[arg-type]

    monkeypatch.setattr(timing, "time_window", recorded)
    budget = Budget.fixed(10, warmup_steps=1)
    alone = timing.measure(clock.step, CPU, budget)
    assert windows == [10] and len(alone.step_times_s) == 10 and alone.warmup_steps == 1
    windows.clear()
    group = timing.Group(0, 2, _OtherRank())
    m = timing.measure(clock.step, CPU, budget, group=group)
    # windows of the other rank's 3 steps; its plateau moves 3 steps into the warm-up; its
    # rule runs 2 windows (of 1 step: max_steps is reached) past this one's
    assert windows == [3, 3, 3, 3, 1, 1, 1]
    assert m.warmup_steps == 1 + 3 and len(m.step_times_s) == 12
    assert not m.cut


def test_a_deadline_past_on_any_rank_cuts_every_ranks_measurement(clock: _Clock) -> None:
    def late(values: list[float]) -> list[float]:
        return [values[0], 1.0] if len(values) == 2 else values

    # its own rule wants 10 s of steps; the other rank is past the deadline after one window
    budget = dataclasses.replace(Budget.fixed(1000, warmup_steps=1), min_steps=5, min_time_s=10)
    m = timing.measure(clock.step, CPU, budget, group=timing.Group(0, 2, late))
    assert m.cut and 5 <= len(m.step_times_s) < 1000 and m.wall_time_s < 10
    assert timing.Group().least(7) == 7 and not timing.Group().any(False)
