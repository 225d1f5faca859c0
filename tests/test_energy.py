"""The energy rules on synthetic readings: a counter that moves every 100 ms, read at 100 Hz,
as NVML's total-energy counter behaves on an H100; and the power integral over a synthetic power
trace whose true energy is known exactly, read on the sampler's own schedule (a fake clock)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
from fake_nvml import window_readings

from gpubench.probes.energy import MAX_ERROR_REL, MAX_STATED_ERROR_REL, from_counter, from_power
from gpubench.probes.nvml_readings import Reading, summarise


def _window(
    duration_s: float,
    power_w: float,
    update_s: float = 0.1,
    every_s: float = 0.01,
    phase_s: float = 0.037,
) -> tuple[list[float], list[float]]:
    """Readings every `every_s` over the window of a counter that adds up `power_w` exactly
    but shows it only at its updates, every `update_s` (the first `phase_s` into the window)."""
    n = round(duration_s / every_s)
    times = [i * every_s for i in range(n + 1)]
    counter = []
    for t in times:
        updates = math.floor((t - phase_s) / update_s + 1e-9) + 1 if t >= phase_s else 0
        last_update = phase_s + (updates - 1) * update_s if updates else -math.inf
        counter.append(5000.0 + power_w * max(last_update, 0.0))
    return times, counter


def test_a_long_window_measures_energy_within_its_bound() -> None:
    times, counter = _window(1.5, 300.0)
    naive = counter[-1] - counter[0]
    got = from_counter(times, counter)
    truth = 300.0 * 1.5
    assert got.energy_j is not None and got.note is None
    assert got.error_rel is not None and got.error_rel <= MAX_ERROR_REL
    assert abs(got.energy_j - truth) / truth <= got.error_rel
    assert got.resolution_s == pytest.approx(0.1)
    # the plain difference misses up to a whole update period: several percent here
    assert abs(naive - truth) / truth > MAX_ERROR_REL


def test_a_short_window_is_null_with_the_reason() -> None:
    times, counter = _window(0.5, 300.0)
    got = from_counter(times, counter)
    assert got.energy_j is None and got.error_rel is not None and got.error_rel > MAX_ERROR_REL
    assert got.note is not None and "every 100 ms" in got.note and "budget.min_time_s" in got.note


def test_a_counter_that_moves_once_is_too_coarse() -> None:
    times, counter = _window(0.12, 300.0)
    got = from_counter(times, counter)
    assert got.energy_j is None and got.note is not None and "moved 1 time(s)" in got.note


# --- the power integral, where the counter is too coarse for the window -----------------------


class StepPower:
    """A training loop's power: `high` W for `duty` of each `period_s` (kernels), `low` W for
    the rest (launches, the optimizer), on a drift of `drift_w_per_s`; `phase_s` shifts it."""

    def __init__(self, period_s: float, phase_s: float, high: float = 420.0, low: float = 180.0):
        self.period, self.phase, self.high, self.low = period_s, phase_s, high, low
        self.duty, self.drift = 0.6, 15.0

    def __call__(self, t: float) -> float:
        high = ((t + self.phase) / self.period) % 1.0 < self.duty
        return (self.high if high else self.low) + self.drift * t

    def energy(self, t: float) -> float:
        """The exact integral of the power over [0, t]."""

        def time_high(x: float) -> float:  # time spent high in [0, x] of the unshifted wave
            whole, part = divmod(x, self.period)
            return whole * self.duty * self.period + min(part, self.duty * self.period)

        high_s = time_high(t + self.phase) - time_high(self.phase)
        return self.low * t + (self.high - self.low) * high_s + self.drift * t * t / 2

    def reading(self, update_s: float = 0.1, counter_phase_s: float = 0.037) -> Callable:
        """The device as NVML shows it: instantaneous power, and a total-energy counter that
        moves every `update_s` (the first `counter_phase_s` into the window)."""

        def read(t: float) -> Reading:
            updates = (
                math.floor((t - counter_phase_s) / update_s) + 1 if t >= counter_phase_s else 0
            )
            shown = counter_phase_s + (updates - 1) * update_s if updates else 0.0
            return Reading(t_s=t, power_w=self(t), energy_j=9000.0 + self.energy(shown))

        return read


def _sampled(power: StepPower, seed: int, duration_s: float = 1.0) -> tuple[list[Reading], float]:
    readings = window_readings(duration_s, power.reading(), seed=seed)
    truth = power.energy(readings[-1].t_s) - power.energy(readings[0].t_s)
    return readings, truth


@pytest.mark.parametrize(
    ("high", "low", "method"),
    # a gentle rhythm (300 +- 20 W): the power integral's bound is the smaller; a step that
    # swings 180-420 W: the counter's, even over its 2% (the smaller bound is taken)
    [(320.0, 280.0, "power_integral"), (420.0, 180.0, "counter")],
)
def test_a_1_s_window_gets_energy_within_its_stated_bound(
    high: float, low: float, method: str
) -> None:
    power = StepPower(period_s=0.0073, phase_s=0.002, high=high, low=low)
    readings, truth = _sampled(power, seed=0)
    # the counter over 1 s has a bound above 2% (as on the H100's default points): from_counter
    # alone refuses it
    counter = from_counter([r.t_s for r in readings], [float(r.energy_j or 0) for r in readings])
    assert counter.energy_j is None and counter.error_rel is not None
    assert counter.error_rel > MAX_ERROR_REL
    integral = from_power([r.t_s for r in readings], [float(r.power_w or 0) for r in readings])
    assert integral.error_rel is not None
    s = summarise(readings)
    assert s.energy_method == method and s.energy_j is not None and s.energy_note is None
    assert s.energy_error_rel == min(counter.error_rel, integral.error_rel)
    assert abs(s.energy_j - truth) / truth <= s.energy_error_rel


def test_the_bound_holds_the_true_energy_as_often_as_it_claims() -> None:
    # 3 standard deviations: a miss in 0.3% of windows for a normal error; over 200 windows
    # (phases and slot points varied) more than 2% misses would say the bound is too tight
    misses = 0
    for seed in range(200):
        rng = random.Random(seed)
        power = StepPower(period_s=rng.uniform(0.002, 0.03), phase_s=rng.uniform(0, 0.03))
        readings, truth = _sampled(power, seed=seed)
        times, watts = [r.t_s for r in readings], [float(r.power_w or 0) for r in readings]
        got = from_power(times, watts, max_error_rel=math.inf)  # every bound, however wide
        assert got.energy_j is not None and got.error_rel is not None
        misses += abs(got.energy_j - truth) / truth > got.error_rel
    assert misses <= 4


def test_a_step_locked_to_a_fixed_grid_is_why_readings_fall_at_random_points() -> None:
    # a step of exactly half the 10 ms interval, read at the same point of every slot: every
    # reading sees the same phase, and the integral is off by far more than its stated bound
    power = StepPower(period_s=0.005, phase_s=0.0)
    times = [i * 0.01 + 0.001 for i in range(100)]
    locked = from_power(times, [power(t) for t in times])
    truth = power.energy(times[-1]) - power.energy(times[0])
    assert locked.energy_j is not None and locked.error_rel is not None
    assert abs(locked.energy_j - truth) / truth > 3 * locked.error_rel
    # the sampler's grid, one random point per slot, holds the same step within its bound
    readings, truth = _sampled(power, seed=3)
    s = summarise(readings)
    assert s.energy_j is not None and s.energy_error_rel is not None
    assert abs(s.energy_j - truth) / truth <= s.energy_error_rel


def test_steady_power_integrates_exactly() -> None:
    times = [0.01 * i for i in range(101)]
    got = from_power(times, [250.0] * len(times))
    assert got.energy_j == pytest.approx(250.0) and got.error_rel == 0.0


def test_too_few_power_readings_or_too_wide_a_bound_is_null_with_the_reason() -> None:
    got = from_power([0.0, 0.5, 1.0], [100.0, 200.0, 300.0])
    assert got.energy_j is None and got.note is not None and "too few" in got.note
    times = [0.01 * i for i in range(20)]
    swings = from_power(times, [50.0 if i % 2 else 450.0 for i in range(20)])
    assert swings.energy_j is None and swings.error_rel is not None
    assert swings.error_rel > MAX_STATED_ERROR_REL
    assert swings.note is not None and "above 10%" in swings.note
