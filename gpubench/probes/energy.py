"""Energy over a window, with a stated error: from a total-energy counter that moves in steps
(`from_counter`), or from the sampled power (`from_power`) where the counter is too coarse.

Counter: NVML's moves about every 100 ms on an H100, so a plain difference of two readings is off
by up to an update period (5-33% of a 0.3-2 s window). The energy between the first and the last
update seen is exact; over a steady loop, that span's mean power times the window is the window's
energy. The error bound is the uncertainty of the two update times (the reading gaps around them)
over the span; `from_counter` refuses one above `max_error_rel`.

Power integral: the readings are a stratified random sample (probes.sampler: one at a random point
of each slot), integrated by trapezoids. Reading i has weight w_i (half of each gap beside it);
its miss of the fast power variation (variance s^2 within a slot) is independent, mean 0, so the
integral's error has standard deviation s * sqrt(sum w_i^2). s^2 is estimated as half the mean
squared difference of consecutive readings (von Neumann: a slow drift only makes it err high).
The bound is POWER_SIGMAS (3) deviations; MIN_POWER_READINGS (10) readings at least, since the
estimate of s from n - 1 differences is uncertain by about 1/sqrt(2(n - 1)). The power must be
instantaneous (nvml.Device.power_reading): a one-second average lags the window unseen.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass

MAX_ERROR_REL = 0.02
# No figure above this bound: twice NVML's stated +-5% power accuracy (Fermi, Kepler) would make
# the figure the method's, not the device's.
MAX_STATED_ERROR_REL = 0.10
POWER_SIGMAS = 3.0
MIN_POWER_READINGS = 10


def trapezoid(times_s: list[float], values: list[float]) -> float:
    """The trapezoid integral of `values` taken at `times_s` (0 for fewer than two)."""
    pairs = zip(itertools.pairwise(times_s), itertools.pairwise(values), strict=True)
    return sum((t1 - t0) * (v0 + v1) / 2 for (t0, t1), (v0, v1) in pairs)


@dataclass(frozen=True)
class Energy:
    """Energy in joules over a window, the bound on its relative error (from_power's:
    POWER_SIGMAS standard deviations), `note`: why `energy_j` is None, else None, and
    (from_counter's) the counter's update period seen (seconds, median)."""

    energy_j: float | None
    error_rel: float | None
    note: str | None
    resolution_s: float | None = None


def from_counter(
    times_s: list[float], counter_j: list[float], max_error_rel: float = MAX_ERROR_REL
) -> Energy:
    """The window's energy from counter readings `counter_j` taken at `times_s` (seconds, in
    order, the first at the window's start and the last at its end), by the module's rule."""
    if len(times_s) != len(counter_j) or len(times_s) < 2:
        raise ValueError("need two or more readings, each with its time")
    duration = times_s[-1] - times_s[0]
    changes = [i for i in range(1, len(counter_j)) if counter_j[i] != counter_j[i - 1]]
    if len(changes) < 2:
        return Energy(
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
        return Energy(None, None, "the energy counter went backwards", resolution)
    error = ((times_s[a] - times_s[a - 1]) + (times_s[b] - times_s[b - 1])) / span
    if error > max_error_rel:
        return Energy(
            None,
            error,
            f"the energy counter moves every {resolution * 1e3:.3g} ms: over this "
            f"{duration:.3g} s window its error bound is {error:.1%}, above "
            f"{max_error_rel:.0%}; measure longer (budget.min_time_s)",
            resolution,
        )
    return Energy(energy / span * duration, error, None, resolution)


def from_power(
    times_s: list[float], power_w: list[float], max_error_rel: float = MAX_STATED_ERROR_REL
) -> Energy:
    """The window's energy from power readings `power_w` at `times_s` (in order, spanning the
    window): their trapezoid integral and the module's error bound; None, with the reason,
    under MIN_POWER_READINGS readings, for an integral not positive, or a bound over
    `max_error_rel`."""
    if len(times_s) != len(power_w):
        raise ValueError("need one time per power reading")
    n = len(power_w)
    if n < MIN_POWER_READINGS:
        return Energy(
            None,
            None,
            f"{n} power reading(s) in the window: too few to bound the power integral's error "
            f"(it needs {MIN_POWER_READINGS})",
        )
    gaps = [t1 - t0 for t0, t1 in itertools.pairwise(times_s)]
    if any(g < 0 for g in gaps):
        raise ValueError("power readings must be in time order")
    joules = trapezoid(times_s, power_w)
    if joules <= 0:
        return Energy(None, None, f"the power integral is {joules:.3g} J, not positive")
    weights = [gaps[0] / 2, *((a + b) / 2 for a, b in itertools.pairwise(gaps)), gaps[-1] / 2]
    variance = sum((p1 - p0) ** 2 for p0, p1 in itertools.pairwise(power_w)) / (2 * (n - 1))
    error = POWER_SIGMAS * math.sqrt(variance * sum(w * w for w in weights)) / joules
    if error > max_error_rel:
        return Energy(
            None,
            error,
            f"the power varies so much between readings that its integral's error bound is "
            f"{error:.1%}, above {max_error_rel:.0%}",
        )
    return Energy(joules, error, None)
