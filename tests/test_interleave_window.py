"""The confirmation's windows time steady steps only: the first step after another
configuration's (caches and thread pool re-warmed for this one) is run untimed, so windows of
different step counts are not biased towards the longer ones. A synthetic clock: each step
advances it by what it costs, so nothing here times this machine."""

from __future__ import annotations

import pytest

from gpubench.config.spec import Point
from gpubench.harness import interleave, timing


class _Machine:
    """A clock and two configurations whose steps cost 10 units, 30 when switched in."""

    def __init__(self) -> None:
        self.now = 0.0
        self.last: str | None = None

    def step(self, name: str) -> None:
        self.now += 30.0 if self.last not in (None, name) else 10.0
        self.last = name


def test_windows_of_different_lengths_see_the_same_steady_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    machine = _Machine()
    monkeypatch.setattr(timing, "_clock", lambda: machine.now)
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", 4)
    per_step = []
    for _ in range(3):  # rounds: a window of 2 steps of "a", then one of 1 step of "b"
        a = interleave._window(point, lambda: machine.step("a"), 2) / 2
        b = interleave._window(point, lambda: machine.step("b"), 1) / 1
        per_step.append((a, b))
    # equal configurations measure equal (timing the switch-in step, "a" read 20 and "b" 30)
    assert all(a == b == 10.0 for a, b in per_step), per_step


def test_a_compiling_first_step_leaves_the_windows_several_steps() -> None:
    # Two real tiny MLPs whose first step takes 0.9 s more (as compiling does: past the 0.75 s
    # each may warm up in a 3 s budget) and their second 0.3 s more. The warm-up is set-up
    # outside the budget (reported), its limit counted after the first step, and the estimate
    # of a step comes from the settled steps: with the second step taken for the pace, the
    # switch-in steps alone overran the rounds' budget and every window shrank to one step.
    points = [
        # one thread: on a busy machine two threads' tiny steps wait on each other (160 ms)
        Point("compile_workloads:compiles_slowly", "tiny", "cpu", "fp32", "sgd", b, threads=1)
        for b in (4, 8)
    ]
    rounds = interleave.interleave(points, 3.0, 0.5, 6, 6)
    assert all(len(r) == 6 for r in rounds.samples_per_s)
    assert min(rounds.window_steps) >= 3, rounds.window_steps
    assert all(s >= 0.9 for s in rounds.first_step_s), rounds.first_step_s
    assert rounds.setup_s >= sum(rounds.first_step_s) + 2 * 0.3
