"""Warm-up, adaptive stopping and statistics, driven by a clock the test controls."""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from gpubench.config.spec import Budget
from gpubench.harness import timing
from gpubench.harness.timing import Stats, measure, median_ci_indices

CPU = torch.device("cpu")


class FakeClock:
    """A host clock that moves only when a fake step 'runs' for its programmed duration."""

    def __init__(self, durations: Iterator[float]) -> None:
        self.now = 1000.0
        self.durations = durations
        self.steps = 0

    def __call__(self) -> float:
        return self.now

    def step(self) -> int:
        self.now += next(self.durations)
        self.steps += 1
        return self.steps


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    c = FakeClock(itertools.repeat(0.001))
    monkeypatch.setattr(timing, "_clock", c)
    yield c


def test_median_ci_indices_match_the_binomial_table() -> None:
    # Exact 95% order statistics of the median (1-based ranks 6..15 for n=20, 40..61 for n=100).
    assert median_ci_indices(5) is None
    assert median_ci_indices(6) == (0, 5)
    assert median_ci_indices(20) == (5, 14)
    assert median_ci_indices(100) == (39, 60)


@pytest.mark.parametrize("n", [8, 30, 101])
def test_median_ci_covers_the_true_median_95_percent_of_the_time(n: int) -> None:
    rng = np.random.default_rng(0)
    trials = 4000
    samples = np.sort(rng.exponential(size=(trials, n)), axis=1)
    lo, hi = median_ci_indices(n)  # type: ignore[misc]
    true_median = math.log(2)
    covered = np.mean((samples[:, lo] <= true_median) & (true_median <= samples[:, hi]))
    assert 0.94 <= covered <= 0.995


def test_stats_of_known_times() -> None:
    times = [float(x) for x in range(1, 11)]  # 1..10 s
    s = Stats.of(times)
    assert s.n == 10
    assert s.median_s == 5.5
    assert s.mean_s == 5.5
    assert s.iqr_s == pytest.approx(7.75 - 3.25)
    assert s.p90_s == pytest.approx(9.1)
    assert s.cv == pytest.approx(np.std(times, ddof=1) / 5.5)
    lo, hi = median_ci_indices(10)  # type: ignore[misc]
    assert s.ci_rel == pytest.approx((times[hi] - times[lo]) / 2 / 5.5)
    assert math.isinf(Stats.of([1.0, 2.0]).ci_rel)
    with pytest.raises(ValueError):
        Stats.of([])


def test_steady_steps_stop_at_the_minimum_and_are_not_noisy(clock: FakeClock) -> None:
    budget = Budget(
        warmup_steps=3, warmup_min_s=0.0, min_steps=10, min_time_s=0.05, max_time_s=10.0
    )
    m = measure(clock.step, CPU, budget)
    # the first step and then three that agree: warm-up is steady after four
    assert m.warmup_steps == 4 and m.warmup_steady
    assert m.warmup_time_s == pytest.approx(0.004)
    assert m.stats.n >= 50  # min_time_s of 1 ms steps
    assert m.wall_time_s < 1.0  # stopped long before the budget
    assert m.stats.median_s == pytest.approx(0.001)
    assert not m.noisy and m.stats.ci_rel <= budget.target_rel_ci
    assert m.step_time_sum_s == pytest.approx(m.wall_time_s)
    assert m.timer == "perf_counter"
    assert m.outputs == [1, 4 + m.stats.n]  # first warm-up step, last measured step


def test_noisy_steps_run_to_the_budget_and_are_flagged(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(1)
    clock.durations = iter(lambda: float(rng.uniform(0.001, 0.003)), None)
    budget = Budget(warmup_steps=1, warmup_min_s=0.0, min_steps=10, max_time_s=0.3)
    m = measure(clock.step, CPU, budget)
    assert m.noisy and m.stats.ci_rel > budget.target_rel_ci
    assert 0.3 <= m.wall_time_s < 0.3 + 0.01  # the last window is cut to fit the budget
    assert len(m.step_times_s) == m.stats.n


def test_warm_up_is_kept_out_of_the_measured_times(clock: FakeClock) -> None:
    # Warm-up steps take 1 s (a slow first step, autotuning); measured ones 1 ms.
    clock.durations = itertools.chain([1.0, 1.0], itertools.repeat(0.001))
    m = measure(clock.step, CPU, Budget.fixed(steps=7, warmup_steps=2))
    assert m.warmup_steps == 2 and m.warmup_time_s == pytest.approx(2.0)
    assert m.stats.n == 7 and max(m.step_times_s) == pytest.approx(0.001)


def test_probe_spans_exactly_the_measured_windows(clock: FakeClock) -> None:
    seen: dict[str, float] = {}

    @contextlib.contextmanager
    def probe() -> Iterator[None]:
        seen["enter"] = clock.now
        yield
        seen["exit"] = clock.now

    start = clock.now
    m = measure(clock.step, CPU, Budget.fixed(steps=20, warmup_steps=4), probe=probe())
    assert seen["enter"] == pytest.approx(start + m.warmup_time_s)
    assert seen["exit"] - seen["enter"] == pytest.approx(m.wall_time_s)


def test_fixed_budget_measures_exactly_its_steps(clock: FakeClock) -> None:
    m = measure(clock.step, CPU, Budget.fixed(steps=13, warmup_steps=1))
    assert m.stats.n == 13 and not m.noisy


def test_real_cpu_step_times_add_up_to_the_wall_clock() -> None:
    x = torch.randn(64, 64)
    m = measure(lambda: x @ x, CPU, Budget.fixed(steps=20, warmup_steps=2))
    # Marks share boundaries: the per-step times cover the window but for the loop's overhead.
    assert 0.9 * m.wall_time_s <= m.step_time_sum_s <= m.wall_time_s


@pytest.mark.gpu
def test_cuda_event_times_agree_with_the_synchronised_wall_clock() -> None:
    cuda = torch.device("cuda")
    a = torch.randn(4096, 4096, device=cuda)
    m = measure(lambda: a @ a, cuda, Budget(min_time_s=0.5, max_time_s=2.0))
    assert m.timer == "cuda_event"
    assert abs(m.step_time_sum_s - m.wall_time_s) / m.wall_time_s < 0.02


def test_first_step_replaces_the_first_warm_up_step(clock: FakeClock) -> None:
    observed: list[int] = []

    def first() -> int:
        observed.append(clock.step())
        return -1

    m = measure(clock.step, CPU, Budget.fixed(steps=5, warmup_steps=3), first_step=first)
    assert observed == [1] and m.warmup_steps == 3
    assert clock.steps == 3 + 5  # no extra step for the observed one
    assert m.outputs[0] == -1


@pytest.mark.parametrize(("min_steps", "expected"), [(10, 6), (6, 6), (3, 3)])
def test_the_time_budget_never_stops_short_of_a_confidence_interval(
    clock: FakeClock, min_steps: int, expected: int
) -> None:
    # Steps of 0.4 s against a 1 s budget: time alone would stop after 3 steps, with no CI.
    clock.durations = itertools.repeat(0.4)
    budget = Budget(warmup_steps=1, warmup_min_s=0.0, min_steps=min_steps, max_time_s=1.0)
    m = measure(clock.step, CPU, budget)
    assert m.stats.n == expected
    assert math.isfinite(m.stats.ci_rel) == (expected >= timing.min_samples_for_ci())
    assert timing.min_samples_for_ci() == 6  # median_ci_indices(5) is None, (6) is not


def test_max_steps_still_rules_over_the_confidence_interval(clock: FakeClock) -> None:
    clock.durations = itertools.repeat(0.4)
    m = measure(clock.step, CPU, Budget.fixed(steps=2, warmup_steps=1))
    assert m.stats.n == 2


def test_warm_up_runs_until_the_step_time_is_steady(clock: FakeClock) -> None:
    # A slow first step, then steps that settle: 50, 20, 10, 5, 1.05, 1, 0.98 ms, ...
    settling = [0.5, 0.02, 0.01, 0.005, 0.00105, 0.001, 0.00098]
    clock.durations = itertools.chain(settling, itertools.repeat(0.001))
    budget = Budget(warmup_steps=2, warmup_min_s=0.0, min_steps=10, min_time_s=0.0)
    m = measure(clock.step, CPU, budget)
    assert m.warmup_steps == len(settling) and m.warmup_steady
    assert m.warmup_time_s == pytest.approx(sum(settling))
    assert max(m.step_times_s) == pytest.approx(0.001)


def test_warm_up_that_never_steadies_ends_at_its_time_limit(clock: FakeClock) -> None:
    clock.durations = itertools.cycle([0.01, 0.02])
    budget = Budget(warmup_steps=1, warmup_min_s=0.0, warmup_max_s=0.5, min_steps=10)
    m = measure(clock.step, CPU, budget)
    assert not m.warmup_steady
    assert 0.5 <= m.warmup_time_s <= 0.5 + 0.02


def test_steady_is_the_last_steps_within_the_tolerance() -> None:
    assert timing.steady([9.0, 1.0, 1.05, 0.96], 0.1)
    assert not timing.steady([1.0, 1.0, 1.2], 0.1)
    assert not timing.steady([1.0, 1.0], 0.1)  # too few steps to tell
