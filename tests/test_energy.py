"""The energy window rule on synthetic counter readings: a counter that moves every 100 ms,
read at 100 Hz, as NVML's total-energy counter behaves on an H100."""

from __future__ import annotations

import math

import pytest

from gpubench.probes.energy import MAX_ERROR_REL, from_counter


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
