"""Energy over a window from a total-energy counter that moves in steps, with a stated error.

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
  over the span between them. Above MAX_ERROR_REL (2%) the energy is null, with the reason,
  and a longer window (budget.min_time_s) brings it under: at 100 Hz sampling, about 1.5 s.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

MAX_ERROR_REL = 0.02


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
