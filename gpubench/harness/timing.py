"""Step timing: warm-up, adaptive measurement windows, and the statistics of raw step times.

On CUDA each step is bracketed by CUDA events that are read only after a window ends, so the
window holds no host synchronisation; on the CPU a perf_counter timestamp marks each step. Each
window is also timed with a synchronised wall clock, so the two can be checked against each other.
Steps share their boundary marks: step i runs from mark i to mark i+1, so the step times of a
window add up to the window's device time.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gpubench.config.spec import Budget
from gpubench.harness.step_stats import Stats, min_samples_for_ci
from gpubench.probes.current_device import stream_of, synchronize

# Aim for windows of about this many seconds between the checks of the stopping rule.
_WINDOW_S = 0.25

# The host clock (seconds); a module attribute so that tests can drive the stopping rule with a
# clock of their own instead of real time.
_clock: Callable[[], float] = time.perf_counter
# The clock a Budget's `deadline` is read on: time.monotonic, one clock for every process of
# the machine (a tune sets the deadline in its parent; the worker measuring the point reads it).
_deadline_clock: Callable[[], float] = time.monotonic


def past(deadline: float | None) -> bool:
    """Whether `deadline` (a time.monotonic value; None: none) has passed."""
    return deadline is not None and _deadline_clock() >= deadline


class StepMarks:
    """Timestamps of `count` step boundaries on one device.

    CUDA events are created and recorded once before the window (torch creates the underlying
    event lazily, on first record), so a mark inside the window is a bare cudaEventRecord.
    """

    def __init__(self, device: torch.device, count: int) -> None:
        self.cuda = device.type == "cuda"
        self._events: list[torch.cuda.Event] = []
        self._stamps: list[float] = []
        if self.cuda:
            # the device's own stream, not the current device's (a point on cuda:1)
            self._stream = stream_of(device)
            self._events = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
            for event in self._events:
                event.record(self._stream)
        self._n = 0

    def mark(self) -> None:
        if self.cuda:
            self._events[self._n].record(self._stream)
            self._n += 1
        else:
            self._stamps.append(_clock())

    def step_times(self) -> list[float]:
        """Seconds between consecutive marks; call after the device has synchronised."""
        if self.cuda:
            used = self._events[: self._n]
            return [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(used)]
        return [b - a for a, b in itertools.pairwise(self._stamps)]


@dataclass
class Measurement:
    """The outcome of warming up and measuring a step function."""

    warmup_steps: int
    warmup_time_s: float
    step_times_s: list[float]
    wall_time_s: float  # synchronised host clock over all measured windows
    stats: Stats
    noisy: bool
    outputs: list[object] = field(default_factory=list)  # first and last step's return values
    timer: str = "perf_counter"  # what marked the steps: "cuda_event" or "perf_counter"
    warmup_steady: bool = True  # warm-up ended on steady step times, not on warmup_max_s
    # seconds the first warm-up step took on its own (it compiles, allocates, creates the
    # optimizer's state); None where not timed
    first_step_s: float | None = None
    # the budget's deadline stopped it at a step boundary before its own rule was met (a
    # partial measurement: recorded, never ranked as a full one)
    cut: bool = False

    @property
    def step_time_sum_s(self) -> float:
        """The sum of the per-step times (seconds, by `timer`: CUDA events on a GPU, the host
        clock on the CPU), to be checked against `wall_time_s`."""
        return float(sum(self.step_times_s))


@dataclass(frozen=True)
class Group:
    """The processes that measure one point together (a parallel point's ranks): this one's
    `rank` of `size`, and `largest`, each of a list of values' largest over them all (a
    collective: every rank calls it, in the same order). Alone (ALONE): rank 0 of 1, its own
    values. Every decision of the warm-up, the windows and the profile is taken through it,
    so every rank runs the same steps (each step's collectives must match)."""

    rank: int = 0
    size: int = 1
    largest: Callable[[list[float]], list[float]] = list

    def any(self, flag: bool) -> bool:
        """Whether `flag` holds on any rank."""
        return self.largest([float(flag)])[0] > 0

    def least(self, n: int) -> int:
        """The smallest of every rank's `n`."""
        return -int(self.largest([-float(n)])[0])


ALONE = Group()


def measure(
    step: Callable[[], object],
    device: torch.device,
    budget: Budget,
    probe: AbstractContextManager[Any] | None = None,
    observed_step: Callable[[], object] | None = None,
    group: Group = ALONE,
) -> Measurement:
    """Warm up `step`, then time it in windows until `budget`'s stopping rule is met.

    Returns raw step times and their statistics. The return values of the very first warm-up
    step and of the last measured step are kept (references only: nothing is synchronised).
    `probe` (memory peaks, NVML sampling) is entered after the warm-up, once the device is idle,
    and left after the last window has synchronised: it spans exactly the measured windows and
    the bookkeeping between them. `observed_step`, when given, runs in place of the second
    warm-up step (the same step under a FLOP counter, say): a steady step, as the first one
    compiles and creates the optimizer's state; observing it costs no extra step, and its time
    enters neither the warm-up's steadiness nor the first estimate of a step.
    Where `budget.deadline` (a time.monotonic value) passes, the warm-up stops at the next step
    boundary (its first step always runs), windows are sized to end by it, and measuring stops
    after the window it falls in (one measured step at the least): the Measurement is `cut`.
    Without a deadline nothing here changes. A `group` (a parallel point's ranks) takes each
    decision together: another warm-up step or window while any rank's rule says so, each
    window as long as the shortest any rank asks for, a slow plateau as long as the longest
    any rank saw, a cut where any rank's deadline passed.
    """
    warm = warm_up(step, device, budget, observed_step, group)
    with probe if probe is not None else contextlib.nullcontext():
        return _measure_windows(step, device, budget, warm, group)


def _measure_windows(
    step: Callable[[], object], device: torch.device, budget: Budget, warm: WarmUp, group: Group
) -> Measurement:
    times: list[float] = []
    wall = 0.0
    warmup_steps, warmup_time, estimate = warm.steps, warm.time_s, warm.estimate_s
    cut = False
    while True:
        n = _window_size(len(times), wall, estimate, budget)
        if budget.deadline is not None and estimate > 0:  # end the window by the deadline
            n = max(1, min(n, int((budget.deadline - _deadline_clock()) / estimate)))
        window = time_window(step, device, group.least(n))
        wall += window.wall_s
        times.extend(window.times_s)
        # agreed: every rank keeps the same steps (the longest plateau is shorter than the times)
        slow = int(group.largest([_plateau(times, budget.warmup_steady_rel)])[0])
        if slow:  # still warming up: those steps join the warm-up, and measuring goes on
            share = sum(times[:slow]) / sum(times)
            warmup_steps += slow
            warmup_time += share * wall
            wall -= share * wall  # with their share of the loop's overhead between the marks
            del times[:slow]
        stats = Stats.of(times)
        estimate = stats.median_s
        # one collective for both: whether any rank's rule wants more, and any rank is late
        go_on, late = group.largest([not _done(stats, wall, budget), past(budget.deadline)])
        if not go_on:
            break
        if late or warm.cut:  # at a step boundary, its own rule not met
            cut = True
            break
    timer = "cuda_event" if device.type == "cuda" else "perf_counter"
    outputs = [warm.first_output, window.last_output]
    noisy = stats.noisy(budget.target_rel_ci)
    return Measurement(
        warmup_steps, warmup_time, times, wall, stats, noisy, outputs, timer, warm.steady,
        warm.first_s, cut,
    )  # fmt: skip


@dataclass(frozen=True)
class Window:
    """`n` steps timed back to back: each step's seconds (by StepMarks), the synchronised host
    clock over them all, and the last step's return value (unsynchronised)."""

    times_s: list[float]
    wall_s: float
    last_output: object


def time_window(step: Callable[[], object], device: torch.device, n: int) -> Window:
    """Run `n` steps between two synchronisations, marking each step's boundary (CUDA events on
    a GPU, so the window holds no host synchronisation). The one measured loop: single points,
    parallel ranks (both through measure()) and the confirmation's rounds all time their steps
    here."""
    marks = StepMarks(device, n + 1)
    last: object = None
    synchronize(device)
    t0 = _clock()
    marks.mark()
    for _ in range(n):
        last = step()
        marks.mark()
    synchronize(device)
    return Window(marks.step_times(), _clock() - t0, last)


# Warm-up is steady once this many consecutive step times (the first step excluded: it
# compiles, autotunes, allocates; and the observed step: it runs under counters) agree within
# Budget.warmup_steady_rel of their median, and that median is no slower than the fastest
# level the warm-up has reached (see steady()) by more than the same tolerance. A slow plateau
# that still passes is caught at the start of the measured steps (_plateau).
STEADY_STEPS = 3


def steady(times: list[float], rel: float) -> bool:
    """Whether the last STEADY_STEPS of `times` (seconds) lie within `rel` of their median,
    and that median is within `rel` of the fastest level seen: the least median of any
    STEADY_STEPS consecutive `times` (steps that agree on a level that earlier steps undercut
    are a plateau, not the steady state; a single fast step is not a level)."""
    if len(times) < STEADY_STEPS:
        return False
    last = sorted(times[-STEADY_STEPS:])
    median = last[STEADY_STEPS // 2]
    agree = median > 0 and (last[-1] - last[0]) <= rel * median
    return agree and median <= (1 + rel) * _fastest_level(times)


def _fastest_level(times: list[float]) -> float:
    """The least median of STEADY_STEPS consecutive `times` (at least STEADY_STEPS of them)."""
    window = np.lib.stride_tricks.sliding_window_view(np.asarray(times), STEADY_STEPS)
    return float(np.median(window, axis=1).min())


def _plateau(times: list[float], rel: float) -> int:
    """How many of the first measured `times` (seconds) belong to the warm-up: a leading run of
    at least STEADY_STEPS steps, each slower by more than `rel` than the 90th percentile of the
    later half (the settled level and its noise), is a slow plateau that the warm-up's rule took
    for the steady state (12 steps of 50 ms before steps of 5 ms, say); 0 where there is none.
    Noise alone seldom puts three steps in a row above the later steps' 90th percentile. A
    plateau longer than half the measured steps is not seen: the interval then spans both
    levels, and the point is flagged noisy."""
    if len(times) < 2 * STEADY_STEPS:
        return 0
    settled = float(np.percentile(times[len(times) // 2 :], 90))
    run = next((i for i, t in enumerate(times) if t <= (1 + rel) * settled), len(times))
    return run if STEADY_STEPS <= run < len(times) else 0


def still_warming(
    times: list[float],
    steps: int,
    elapsed_s: float,
    settling_s: float,
    budget: Budget,
    min_steps: int,
) -> bool:
    """The warm-up's rule: whether to run another warm-up step after `steps` steps, `elapsed_s`
    seconds since the first began and `settling_s` since it ended, `times` (seconds) being the
    plain steps' times after the first. It goes on until at least `min_steps` steps and
    `budget.warmup_min_s` seconds have run and the step time is steady (see steady()), or
    `budget.warmup_max_s` has passed after the first step: the first step compiles (seconds to
    minutes), and a limit that counted it would end a compiled warm-up before its steps settle.
    A pure function: the ranks of a parallel point apply it each to its own times and go on
    while any one would."""
    if steps < min_steps or elapsed_s < budget.warmup_min_s:
        return True
    return not steady(times, budget.warmup_steady_rel) and settling_s < budget.warmup_max_s


@dataclass(frozen=True)
class WarmUp:
    """A warm-up: the first step's output and its own seconds (it compiles, allocates, creates
    the optimizer's state), the observed step's output (None without one), the steps run and
    their seconds (the first included), the first estimate of a step (seconds) and whether it
    ended steady."""

    first_output: object
    first_s: float
    observed: object
    steps: int
    time_s: float
    estimate_s: float
    steady: bool
    cut: bool = False  # the budget's deadline ended it before its rule did


def warm_up(
    step: Callable[[], object],
    device: torch.device,
    budget: Budget,
    observed_step: Callable[[], object] | None = None,
    group: Group = ALONE,
) -> WarmUp:
    """The one warm-up (single points, parallel ranks, the confirmation's candidates).

    The rule is still_warming()'s. An `observed_step` runs second; the estimate comes from the
    later half of the plain steps after it (the steadiness rule ends on agreeing fast steps,
    which would cut the first window past the budget), or where there are none (a fixed
    warm-up of 2 steps), from the faster of the first two (an overestimate: the first window
    is only shorter). A `group` goes on while any rank's rule would, so every rank stops on
    the same step."""
    synchronize(device)
    t0 = _clock()
    first = step()
    synchronize(device)
    t_first = _clock()
    first_s = last = t_first - t0
    n, observed = 1, None
    if observed_step is not None:
        observed = observed_step()
        n += 1
        synchronize(device)
        last = min(last, _clock() - t_first)  # an estimate only if no plain step follows
    times: list[float] = []  # the plain steps after the first
    min_steps = max(budget.warmup_steps, 2 if observed_step is not None else 1)
    cut = False
    while group.any(
        still_warming(times, n, (now := _clock()) - t0, now - t_first, budget, min_steps)
    ):
        # a step boundary: the rest goes to one measured step (no collective without a deadline)
        if budget.deadline is not None and group.any(past(budget.deadline)):
            cut = True
            break
        t_step = _clock()
        step()
        n += 1
        synchronize(device)
        last = _clock() - t_step
        times.append(last)
    estimate = float(np.median(times[len(times) // 2 :])) if times else last
    is_steady = not group.any(not steady(times, budget.warmup_steady_rel))
    return WarmUp(first, first_s, observed, n, _clock() - t0, estimate, is_steady, cut)


def _window_size(n_done: int, wall_s: float, step_estimate_s: float, budget: Budget) -> int:
    """Steps in the next window: what the minimum still needs or about _WINDOW_S of work,
    whichever is more, but never past the time budget or max_steps (at least one step)."""
    need = max(budget.min_steps - n_done, 1)
    if step_estimate_s <= 0:
        return max(1, min(need, budget.max_steps - n_done))
    n = min(max(need, int(_WINDOW_S / step_estimate_s)), budget.max_steps - n_done)
    steps_left_in_budget = (budget.max_time_s - wall_s) / step_estimate_s  # may be infinite
    return max(1, int(min(n, max(steps_left_in_budget, _ci_floor(budget) - n_done))))


def fewest_steps(budget: Budget) -> int:
    """Steps a point runs after its first whatever its time limits: warm-up's fewest and the
    measuring's (a slow point's floor: a 2.3 s step makes a 0.5 s trial last 20 s)."""
    return budget.warmup_steps + _ci_floor(budget)


def _ci_floor(budget: Budget) -> int:
    """Steps the time budget never stops short of: min_steps, up to the fewest that give the
    median a confidence interval (6), so a slow point still has one (max_steps still rules)."""
    return min(budget.min_steps, min_samples_for_ci())


def _done(stats: Stats, wall_s: float, budget: Budget) -> bool:
    if stats.n >= budget.max_steps:
        return True
    if wall_s >= budget.max_time_s:
        return stats.n >= _ci_floor(budget)
    enough = stats.n >= budget.min_steps and wall_s >= budget.min_time_s
    return enough and stats.ci_rel <= budget.target_rel_ci
