"""Step timing: warm-up, adaptive measurement windows, and the statistics of raw step times.

On CUDA each step is bracketed by CUDA events that are read only after a window ends, so the
window holds no host synchronisation; on the CPU a perf_counter timestamp marks each step. Each
window is also timed with a synchronised wall clock, so the two can be checked against each other.
Steps share their boundary marks: step i runs from mark i to mark i+1, so the step times of a
window add up to the window's device time.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from gpubench.spec import Budget

# Aim for windows of about this many seconds between the checks of the stopping rule.
_WINDOW_S = 0.25


class _Marks:
    """Timestamps of `count` step boundaries on one device.

    CUDA events are created and recorded once before the window (torch creates the underlying
    event lazily, on first record), so a mark inside the window is a bare cudaEventRecord.
    """

    def __init__(self, device: torch.device, count: int) -> None:
        self.cuda = device.type == "cuda"
        self._events: list[torch.cuda.Event] = []
        self._stamps: list[float] = []
        if self.cuda:
            self._events = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
            for event in self._events:
                event.record()
        self._n = 0

    def mark(self) -> None:
        if self.cuda:
            self._events[self._n].record()
            self._n += 1
        else:
            self._stamps.append(time.perf_counter())

    def step_times(self) -> list[float]:
        """Seconds between consecutive marks; call after the device has synchronised."""
        if self.cuda:
            used = self._events[: self._n]
            return [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(used)]
        return [b - a for a, b in itertools.pairwise(self._stamps)]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class Stats:
    """Summary of raw step times (seconds). `ci_rel` is the half-width of the 95% confidence
    interval of the median (distribution-free, from order statistics) over the median."""

    n: int
    median_s: float
    mean_s: float
    iqr_s: float
    p90_s: float
    cv: float
    ci_rel: float

    @staticmethod
    def of(times: list[float]) -> Stats:
        if not times:
            raise ValueError("no step times to summarise")
        x = np.sort(np.asarray(times, dtype=float))
        n = len(x)
        median = float(np.median(x))
        q1, q3, p90 = (float(v) for v in np.percentile(x, [25, 75, 90]))
        mean = float(x.mean())
        cv = float(x.std(ddof=1) / mean) if n > 1 and mean > 0 else math.inf
        return Stats(n, median, mean, q3 - q1, p90, cv, _median_ci_rel(x, median))


def _median_ci_rel(sorted_x: np.ndarray, median: float) -> float:
    """Relative half-width of the 95% CI of the median: the order statistics at
    n/2 -/+ 1.96*sqrt(n)/2 (normal approximation to the binomial)."""
    n = len(sorted_x)
    if n < 6 or median <= 0:
        return math.inf
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half))
    return float((sorted_x[hi] - sorted_x[lo]) / 2 / median)


@dataclass
class Measurement:
    """The outcome of warming up and measuring a step function."""

    warmup_steps: int
    warmup_time_s: float
    first_step_s: float  # the first warm-up step alone: where compilation happens
    step_times_s: list[float]
    wall_time_s: float  # synchronised host clock over all measured windows
    stats: Stats
    noisy: bool
    outputs: list[object] = field(default_factory=list)  # first and last step's return values


def measure(step: Callable[[], object], device: torch.device, budget: Budget) -> Measurement:
    """Warm up `step`, then time it in windows until `budget`'s stopping rule is met.

    Returns raw step times and their statistics. The return values of the very first warm-up
    step and of the last measured step are kept (references only: nothing is synchronised).
    """
    first_output, first_step, warmup_steps, warmup_time = _warm_up(step, device, budget)
    times: list[float] = []
    wall = 0.0
    last_output: object = None
    # The first step carries one-off costs (allocation, autotuning, compilation): leave it out.
    estimate = (warmup_time - first_step) / (warmup_steps - 1) if warmup_steps > 1 else first_step
    while True:
        n_window = _window_size(len(times), wall, estimate, budget)
        marks = _Marks(device, n_window + 1)
        synchronize(device)
        t0 = time.perf_counter()
        marks.mark()
        for _ in range(n_window):
            last_output = step()
            marks.mark()
        synchronize(device)
        wall += time.perf_counter() - t0
        times.extend(marks.step_times())
        stats = Stats.of(times)
        estimate = stats.median_s
        if _done(stats, wall, budget):
            break
    noisy = stats.ci_rel > budget.target_rel_ci
    return Measurement(
        warmup_steps,
        warmup_time,
        first_step,
        times,
        wall,
        stats,
        noisy,
        [first_output, last_output],
    )


def _warm_up(
    step: Callable[[], object], device: torch.device, budget: Budget
) -> tuple[object, float, int, float]:
    synchronize(device)
    t0 = time.perf_counter()
    first = step()
    n = 1
    synchronize(device)
    first_step = time.perf_counter() - t0
    while n < budget.warmup_steps or time.perf_counter() - t0 < budget.warmup_min_s:
        step()
        n += 1
        synchronize(device)
    return first, first_step, n, time.perf_counter() - t0


def _window_size(n_done: int, wall_s: float, step_estimate_s: float, budget: Budget) -> int:
    """Steps in the next window: what the minimum still needs or about _WINDOW_S of work,
    whichever is more, but never past the time budget or max_steps (at least one step)."""
    need = max(budget.min_steps - n_done, 1)
    if step_estimate_s <= 0:
        return max(1, min(need, budget.max_steps - n_done))
    n = min(max(need, int(_WINDOW_S / step_estimate_s)), budget.max_steps - n_done)
    steps_left_in_budget = (budget.max_time_s - wall_s) / step_estimate_s  # may be infinite
    return max(1, int(min(n, steps_left_in_budget)))


def _done(stats: Stats, wall_s: float, budget: Budget) -> bool:
    if stats.n >= budget.max_steps or wall_s >= budget.max_time_s:
        return True
    enough = stats.n >= budget.min_steps and wall_s >= budget.min_time_s
    return enough and stats.ci_rel <= budget.target_rel_ci
