"""The confirmation's windows time steady steps only: the first step after another
configuration's (caches and thread pool re-warmed for this one) is run untimed, so windows of
different step counts are not biased towards the longer ones. A synthetic clock: each step
advances it by what it costs, so nothing here times this machine."""

from __future__ import annotations

import types

import pytest

from gpubench.config.spec import Point
from gpubench.harness import interleave


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
    monkeypatch.setattr(interleave, "time", types.SimpleNamespace(perf_counter=lambda: machine.now))
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", 4)
    per_step = []
    for _ in range(3):  # rounds: a window of 2 steps of "a", then one of 1 step of "b"
        a = interleave._window(point, lambda: machine.step("a"), 2) / 2
        b = interleave._window(point, lambda: machine.step("b"), 1) / 1
        per_step.append((a, b))
    # equal configurations measure equal (timing the switch-in step, "a" read 20 and "b" 30)
    assert all(a == b == 10.0 for a, b in per_step), per_step
