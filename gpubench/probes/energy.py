"""Energy over a window, with a stated error: from a total-energy counter that moves in steps
(`from_counter`), or from the sampled power (`from_power`) where the counter is too coarse.

NVML's total-energy counter does not count continuously: on an H100 it moves about every
100 ms. The plain difference of two readings is then quantised by up to a whole update period,
5-33% of a 0.3-2 s window. The rule here instead times the counter's own updates:

- the window's readings (every `interval` seconds) show when the counter changed; each update
  happened between the reading before the change and the reading that saw it;
- the energy between the first and the last update seen is exact, so the mean power over that
  span is their difference over the time between them, and the window's energy is that power
  times the window (the measured loop is steady: its power over the whole window is its power
  over the span, which covers all of it but for up to one update period at each end);
- the error bound is the uncertainty of the two update times (the reading gaps around them)
  over the span between them. `from_counter` refuses a figure above `max_error_rel` (default
  MAX_ERROR_REL, 2%), with the reason: at 100 Hz sampling that is every window under about
  1.5 s, the default points'. nvml_readings.summarise weighs it against the power integral
  instead, and takes the smaller bound, up to MAX_STATED_ERROR_REL (10%).

The power integral (`from_power`) answers windows too short for the counter. The readings are a
stratified random sample of the window (probes.sampler: one reading at a random point of each
slot of length h), and the energy is their trapezoid integral. Its error is what the readings
miss of the power's variation inside their slots. Write the power as a part that changes slowly
(resolved by the readings: the trapezoid integrates it to within its curvature over a slot) plus
a fast part (the step's own rhythm: kernels, launches, the optimizer) with variance s^2 within a
slot. Reading i carries weight w_i (its share of the trapezoid: half of each gap beside it); the
random point of each slot makes its miss independent of the others, with mean 0 and variance
w_i^2 s^2, so the integral's error has standard deviation s * sqrt(sum w_i^2). s is estimated
from the readings themselves: s^2 is half the mean squared difference of consecutive ones (the von
Neumann estimator: a slow drift adds little to it, and the slot-to-slot change of the slow part
only adds, so it errs high). The stated bound is POWER_SIGMAS (3) of those deviations: a
relative error above it has a chance under 0.3% for a normal error, and the sum of ~100
independent misses is close to normal. It needs MIN_POWER_READINGS (10) readings: the estimate
of s from n - 1 differences is uncertain by about 1/sqrt(2(n - 1)), 24% at 10. The power must be
the instantaneous reading (nvml.Device.power_reading == "instant"): a one-second moving average
lags the window, an error no sample of it shows.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass

MAX_ERROR_REL = 0.02
# No figure where the smaller of the two bounds is above this: NVML's power reading is specified
# to +-5% where NVIDIA states an accuracy at all (Fermi, Kepler), and a method error twice the
# sensor's would make the figure the method's, not the device's.
MAX_STATED_ERROR_REL = 0.10
POWER_SIGMAS = 3.0
MIN_POWER_READINGS = 10


@dataclass(frozen=True)
class CounterEnergy:
    """Energy in joules over a window, the bound on its relative error, the counter's update
    period seen (seconds, median), and `note`: why `energy_j` is None, else None."""

    energy_j: float | None
    error_rel: float | None
    resolution_s: float | None
    note: str | None


def from_counter(
    times_s: list[float], counter_j: list[float], max_error_rel: float = MAX_ERROR_REL
) -> CounterEnergy:
    """The window's energy from counter readings `counter_j` taken at `times_s` (seconds, in
    order, the first at the window's start and the last at its end), by the module's rule."""
    if len(times_s) != len(counter_j) or len(times_s) < 2:
        raise ValueError("need two or more readings, each with its time")
    duration = times_s[-1] - times_s[0]
    changes = [i for i in range(1, len(counter_j)) if counter_j[i] != counter_j[i - 1]]
    if len(changes) < 2:
        return CounterEnergy(
            None,
            None,
            None,
            f"the energy counter moved {len(changes)} time(s) in the {duration:.3g} s window: "
            "too coarse to measure it; measure longer (budget.min_time_s)",
        )
    a, b = changes[0], changes[-1]
    span = times_s[b] - times_s[a]
    energy = counter_j[b] - counter_j[a]
    updates = [times_s[j] - times_s[i] for i, j in itertools.pairwise(changes)]
    resolution = statistics.median(updates)
    if energy <= 0:
        return CounterEnergy(None, None, resolution, "the energy counter went backwards")
    error = ((times_s[a] - times_s[a - 1]) + (times_s[b] - times_s[b - 1])) / span
    if error > max_error_rel:
        return CounterEnergy(
            None,
            error,
            resolution,
            f"the energy counter moves every {resolution * 1e3:.3g} ms: over this "
            f"{duration:.3g} s window its error bound is {error:.1%}, above "
            f"{max_error_rel:.0%}; measure longer (budget.min_time_s)",
        )
    return CounterEnergy(energy / span * duration, error, resolution, None)


@dataclass(frozen=True)
class PowerEnergy:
    """Energy in joules over a window from sampled power, the bound on its relative error
    (POWER_SIGMAS standard deviations), and `note`: why `energy_j` is None, else None."""

    energy_j: float | None
    error_rel: float | None
    note: str | None


def from_power(
    times_s: list[float], power_w: list[float], max_error_rel: float = MAX_STATED_ERROR_REL
) -> PowerEnergy:
    """The window's energy from power readings `power_w` taken at `times_s` (seconds, in order,
    the first at the window's start and the last at its end): their trapezoid integral, with
    the module's error bound. None, with the reason, under MIN_POWER_READINGS readings, where
    the integral is not positive, or where the bound is above `max_error_rel`."""
    if len(times_s) != len(power_w):
        raise ValueError("need one time per power reading")
    n = len(power_w)
    if n < MIN_POWER_READINGS:
        return PowerEnergy(
            None,
            None,
            f"{n} power reading(s) in the window: too few to bound the power integral's error "
            f"(it needs {MIN_POWER_READINGS})",
        )
    gaps = [t1 - t0 for t0, t1 in itertools.pairwise(times_s)]
    if any(g < 0 for g in gaps):
        raise ValueError("power readings must be in time order")
    pairs = zip(gaps, itertools.pairwise(power_w), strict=True)
    joules = sum(g * (p0 + p1) / 2 for g, (p0, p1) in pairs)
    if joules <= 0:
        return PowerEnergy(None, None, f"the power integral is {joules:.3g} J, not positive")
    weights = [gaps[0] / 2, *((a + b) / 2 for a, b in itertools.pairwise(gaps)), gaps[-1] / 2]
    variance = sum((p1 - p0) ** 2 for p0, p1 in itertools.pairwise(power_w)) / (2 * (n - 1))
    error = POWER_SIGMAS * math.sqrt(variance * sum(w * w for w in weights)) / joules
    if error > max_error_rel:
        return PowerEnergy(
            None,
            error,
            f"the power varies so much between readings that its integral's error bound is "
            f"{error:.1%}, above {max_error_rel:.0%}",
        )
    return PowerEnergy(joules, error, None)
