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
from gpubench.harness.step_stats import Stats, median_ci_indices
from gpubench.harness.timing import measure

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


def test_observed_step_replaces_the_second_warm_up_step(clock: FakeClock) -> None:
    """The first step creates the optimizer's state (and compiles): counters observe the
    second, a steady one, at no extra step; the first step's own time is kept."""
    clock.durations = itertools.chain([0.5], itertools.repeat(0.001))
    observed: list[int] = []

    def second() -> int:
        observed.append(clock.step())
        return -1

    m = measure(clock.step, CPU, Budget.fixed(steps=5, warmup_steps=3), observed_step=second)
    assert observed == [2] and m.warmup_steps == 3
    assert clock.steps == 3 + 5  # no extra step for the observed one
    short = measure(clock.step, CPU, Budget.fixed(steps=5, warmup_steps=1), observed_step=second)
    assert short.warmup_steps == 2 and short.stats.n == 5
    assert m.outputs[0] == 1  # the first step's own output
    assert m.first_step_s == pytest.approx(0.5)


def test_observed_step_time_stays_out_of_the_steadiness_and_the_estimate(
    clock: FakeClock,
) -> None:
    # 1 ms steps; the observed step (under counters) takes 1 s.
    def second() -> int:
        clock.now += 1.0
        return -1

    budget = Budget(warmup_steps=1, warmup_min_s=0.0, min_steps=10, min_time_s=0.0)
    m = measure(clock.step, CPU, budget, observed_step=second)
    assert m.warmup_steady and m.warmup_steps == 2 + timing.STEADY_STEPS
    assert max(m.step_times_s) == pytest.approx(0.001)


@pytest.mark.parametrize("budget", [Budget.fixed(steps=40, warmup_steps=1), Budget()])
def test_noisy_is_the_interval_whatever_stopped_the_measurement(
    clock: FakeClock, budget: Budget
) -> None:
    """`--steps N` (a fixed budget) measures N steps whatever their noise, and still flags a
    point whose interval is wider than the target (issue 21: a 36% interval was not noisy)."""
    rng = np.random.default_rng(3)
    clock.durations = iter(lambda: float(rng.uniform(0.001, 0.003)), None)
    m = measure(clock.step, CPU, budget)
    assert m.stats.ci_rel > budget.target_rel_ci and m.noisy


def test_a_point_without_an_interval_is_noisy(clock: FakeClock) -> None:
    m = measure(clock.step, CPU, Budget.fixed(steps=3, warmup_steps=1))  # 3 steps: no interval
    assert math.isinf(m.stats.ci_rel) and m.noisy
    steady_steps = measure(clock.step, CPU, Budget.fixed(steps=10, warmup_steps=1))
    assert steady_steps.stats.ci_rel == 0 and not steady_steps.noisy


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
    assert m.first_step_s == pytest.approx(0.01)
    # the limit counts from the end of the first step
    assert 0.5 <= m.warmup_time_s - m.first_step_s <= 0.5 + 0.02


def test_a_first_step_longer_than_the_limit_still_warms_until_steady(clock: FakeClock) -> None:
    # A 5 s first step (compiling) past warmup_max_s, then steps that settle over 0.3 s: the
    # limit counts after the first step, so the warm-up ends steady on the settled steps.
    settling = [5.0, 0.1, 0.1, 0.05, 0.02, 0.001, 0.001, 0.001]
    clock.durations = itertools.chain(settling, itertools.repeat(0.001))
    budget = Budget(warmup_steps=2, warmup_min_s=0.0, warmup_max_s=1.0, min_steps=10)
    m = measure(clock.step, CPU, budget)
    assert m.first_step_s == pytest.approx(5.0)
    assert m.warmup_steps == len(settling) and m.warmup_steady
    assert max(m.step_times_s) == pytest.approx(0.001)


def test_every_rank_warms_up_while_any_would(clock: FakeClock) -> None:
    # this process steadies after 4 steps; the group's other rank goes on for 6 more, so
    # every rank stops on the same step
    others = iter([1.0] * 6)
    group = timing.Group(0, 2, lambda values: [max(values[0], next(others, 0.0))])
    budget = Budget(warmup_steps=1, warmup_min_s=0.0, warmup_max_s=10.0)
    warm = timing.warm_up(clock.step, CPU, budget, group=group)
    assert warm.steps == 7 and warm.first_output == 1
    assert warm.estimate_s == pytest.approx(0.001)


def test_steady_is_the_last_steps_within_the_tolerance() -> None:
    assert timing.steady([9.0, 1.0, 1.05, 0.96], 0.1)
    assert not timing.steady([1.0, 1.0, 1.2], 0.1)
    assert not timing.steady([1.0, 1.0], 0.1)  # too few steps to tell


def test_a_slow_plateau_is_warm_up_not_measurement(clock: FakeClock) -> None:
    """Issue 21: 12 steps of 50 ms then steps of 5 ms. The 50 ms steps agree with each other,
    so the warm-up's rule took them for the steady state and 8 of them were measured."""
    clock.durations = itertools.chain([0.05] * 12, itertools.repeat(0.005))
    m = measure(clock.step, CPU, Budget())
    assert max(m.step_times_s) == pytest.approx(0.005)
    assert m.warmup_steps == 12 and m.warmup_time_s == pytest.approx(0.6)
    assert m.stats.median_s == pytest.approx(0.005) and not m.noisy
    assert m.wall_time_s == pytest.approx(m.step_time_sum_s)


def test_steady_refuses_a_level_that_faster_steps_undercut() -> None:
    # three agreeing 50 ms steps after three 5 ms ones: a plateau, not the steady state
    assert not timing.steady([0.005, 0.005, 0.005, 0.05, 0.05, 0.05], 0.1)
    assert timing.steady([0.05, 0.05, 0.05, 0.005, 0.005, 0.005], 0.1)
    assert timing.steady([0.0045, 0.005, 0.005, 0.005], 0.1)  # one fast step is not a level


def test_noise_at_the_start_is_not_taken_for_a_plateau() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        times = list(rng.uniform(0.001, 0.003, size=40))
        assert timing._plateau(times, 0.1) == 0
    assert timing._plateau([0.05] * 8 + [0.005] * 10, 0.1) == 8
