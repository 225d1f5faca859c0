"""A Budget's deadline stops warm-up and measurement at a step boundary (tune's trials), with a
tiny real model: the host clock and the deadline's are the test's, one second per step run."""

from __future__ import annotations

import pytest
import torch

from gpubench.config.spec import Budget
from gpubench.harness import timing

CPU = torch.device("cpu")


class StepClock:
    """A clock that reads the number of steps run so far, in seconds."""

    def __init__(self) -> None:
        self.steps = 0

    def __call__(self) -> float:
        return float(self.steps)


def tiny_step(clock: StepClock) -> object:
    """One real training step of a tiny MLP, counted on `clock`."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(4, 8), torch.randn(4, 1)

    def step() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        clock.steps += 1
        return loss.detach()

    return step


# Steps a budget without a deadline cannot stop short of: 3 warm-up, 50 measured.
FIXED = Budget.fixed(50, warmup_steps=3)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> StepClock:
    c = StepClock()
    monkeypatch.setattr(timing, "_deadline_clock", c)
    monkeypatch.setattr(timing, "_clock", c)
    return c


def test_a_deadline_in_the_measured_windows_cuts_at_a_step_boundary(clock: StepClock) -> None:
    step = tiny_step(clock)
    m = timing.measure(step, CPU, FIXED.__class__(**{**vars(FIXED), "deadline": 10.0}))
    assert m.cut
    assert m.warmup_steps == 3
    # every step ran whole: 3 warm-up and 7 measured, the window sized to end at the deadline
    # (10 s: the 10th step's end), not the 50 the budget asks for
    assert clock.steps == m.warmup_steps + len(m.step_times_s) == 10
    assert m.step_times_s == [1.0] * 7


def test_a_deadline_in_the_warm_up_leaves_one_measured_step(clock: StepClock) -> None:
    step = tiny_step(clock)
    m = timing.measure(step, CPU, FIXED.__class__(**{**vars(FIXED), "deadline": 1.0}))
    assert m.cut
    assert m.warmup_steps == 1  # the first step always runs; the deadline stops the rest
    assert len(m.step_times_s) == 1


def test_without_a_deadline_the_budget_rules(clock: StepClock) -> None:
    step = tiny_step(clock)
    m = timing.measure(step, CPU, FIXED)
    assert not m.cut
    assert (m.warmup_steps, len(m.step_times_s)) == (3, 50)


def test_a_deadline_the_measurement_ends_before_does_not_cut(clock: StepClock) -> None:
    step = tiny_step(clock)
    m = timing.measure(step, CPU, FIXED.__class__(**{**vars(FIXED), "deadline": 1000.0}))
    assert not m.cut
    assert (m.warmup_steps, len(m.step_times_s)) == (3, 50)
