"""Interleaved re-measurement of a few configurations (the verdict's confirmation): each is
built and warmed, then timed in short windows (harness.timing.time_window of the sweep's own
step), one window each per round in rotating order, so whatever else the machine does in those
minutes falls on all of them alike.

On a GPU two candidates near the memory limit may not fit together (issue 28): they are held
together only where their rows' peaks fit the device's free memory, else built, warmed, timed
and freed one window at a time (a rebuilt compiled one finds its static graph in the worker's
compile cache). Building, compiling and warming are the set-up, outside the rounds' budget.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch

from gpubench.config.spec import Budget, Point
from gpubench.harness.step import PreparedStep, backend_flags, build_workload, prepare
from gpubench.harness.threads import intra_op_threads
from gpubench.harness.timing import time_window, warm_up
from gpubench.probes import load
from gpubench.probes.current_device import made_current

# The share of the budget the configurations' warm-ups (the sweep's, until steady) may take
# between them after each one's first step (which compiles, however long that takes).
WARMUP_SHARE = 0.5
# Candidates are held together on a GPU where their rows' peaks sum to within this share of
# its free memory: the rest is headroom for the allocator's fragmentation.
FREE_SHARE = 0.9


@dataclass(frozen=True)
class Rounds:
    """`samples_per_s[c][r]`: configuration c's samples/s in round r; `window_steps[c]`: the
    steps in its first window; `setup_s`: building, compiling and warming (every rebuild
    included); `seconds`: the whole re-measurement; `together`: whether they were held
    together; `first_step_s[c]`: c's first step in its first build (compiling, where it does)."""

    samples_per_s: list[list[float]]
    window_steps: list[int]
    setup_s: float
    seconds: float
    other_load_cores: float | None  # other processes' load over the rounds
    busy: bool | None  # whether that load contended the rounds
    together: bool = True
    first_step_s: list[float] = field(default_factory=list)


def fits_together(
    device: str, resident_bytes: Sequence[int | None] | None, free_bytes: int | None
) -> bool:
    """Whether candidates whose measured peaks are `resident_bytes` (None where a row has none)
    can be held at once on `device` with `free_bytes` free: on the CPU always; on a GPU where
    every peak is known and their sum is within FREE_SHARE of the free memory."""
    if not device.startswith("cuda"):
        return True
    if not resident_bytes or free_bytes is None or any(b is None for b in resident_bytes):
        return False
    return sum(int(b) for b in resident_bytes if b is not None) <= FREE_SHARE * free_bytes


class _Candidate:
    """One configuration: its step while it is built, and the seconds of one step and of its
    first step from its first warm-up."""

    def __init__(self, point: Point) -> None:
        self.point = point
        self.prepared: PreparedStep | None = None
        self.estimate = 0.0
        self.first_step_s = 0.0

    def build(self, warm_s: float) -> None:
        """Build and warm it: until steady, or `warm_s` seconds after its first step (two steps
        at the least)."""
        p = self.point
        with _settings(p):
            self.prepared = prepare(p, build_workload(p))
            budget = Budget(warmup_steps=2, warmup_min_s=0.0, warmup_max_s=warm_s)
            warm = warm_up(self.prepared.step, torch.device(p.device), budget)
        if not self.estimate:  # the later steps' median: never the compiling first step's
            self.estimate = max(warm.estimate_s, 1e-6)
            self.first_step_s = warm.first_s

    def free(self) -> None:
        """Drop the model, optimizer state and batches, and the device's cached blocks."""
        self.prepared = None
        if self.point.device.startswith("cuda"):
            gc.collect()  # whatever a reference cycle still holds on the device
            torch.cuda.empty_cache()


@contextlib.contextmanager
def _settings(point: Point) -> Iterator[None]:
    """A point's process-wide settings: threads, backend flags, its device current."""
    with (
        intra_op_threads(point.threads),
        backend_flags(point),
        made_current(torch.device(point.device)),
    ):
        yield


def interleave(
    points: list[Point],
    budget_s: float,
    window_s: float,
    min_rounds: int,
    max_rounds: int,
    deadline_s: float = float("inf"),
    resident_bytes: Sequence[int | None] | None = None,
) -> Rounds:
    """Build and warm each of `points`, then time them in rounds: as many as fit in `budget_s`
    seconds (set-up not counted) with windows of about `window_s` seconds, at most
    `max_rounds`; where fewer than `min_rounds` fit, `min_rounds` of shorter windows (one step
    at the least). No round starts after `deadline_s` seconds of rounds. `resident_bytes`: each
    point's row's peak memory (fits_together)."""
    started = time.perf_counter()
    device = points[0].device
    free = torch.cuda.mem_get_info(torch.device(device))[0] if device.startswith("cuda") else None
    together = fits_together(device, resident_bytes, free)
    candidates = [_Candidate(p) for p in points]
    for c in candidates:  # compiles here: the set-up, not the rounds
        c.build(WARMUP_SHARE * budget_s / len(points))
        if not together:
            c.free()
    setup_s = time.perf_counter() - started
    switch_s = sum(c.estimate for c in candidates)  # each window's untimed first step, per round
    fit = int(budget_s / (window_s * len(points) + switch_s))
    n_rounds = min(max(fit, min_rounds), max_rounds)
    if fit < min_rounds:
        window_s = max(budget_s / min_rounds - switch_s, 0.0) / len(points)
    window_steps = [max(1, round(window_s / c.estimate)) for c in candidates]
    first_windows = list(window_steps)
    rates: list[list[float]] = [[] for _ in points]
    with load.OtherLoad() as others:
        for r in range(n_rounds):
            if time.perf_counter() - started - setup_s > deadline_s:
                break
            for k in range(len(points)):
                i = (r + k) % len(points)  # rotate who goes first
                c = candidates[i]
                t0 = time.perf_counter()
                if c.prepared is None:  # one at a time: built again (its graph is cached)
                    c.build(0.0)
                rebuilt_s = time.perf_counter() - t0
                assert c.prepared is not None
                seconds = _window(c.point, c.prepared.step, window_steps[i])
                t1 = time.perf_counter()
                if not together:
                    c.free()
                setup_s += rebuilt_s + time.perf_counter() - t1
                rates[i].append(c.point.batch_size * window_steps[i] / seconds)
                # the next window's steps from this one's pace: a machine that grows busier
                # (or quieter) does not stretch (or shrink) the windows
                window_steps[i] = max(1, round(window_s * window_steps[i] / seconds))
    needed = max(load.needed_cores(p.device, p.threads or torch.get_num_threads()) for p in points)
    busy = load.contended(others.cores, needed, load.cores())
    return Rounds(
        rates,
        first_windows,
        setup_s,
        time.perf_counter() - started,
        others.cores,
        busy,
        together,
        [c.first_step_s for c in candidates],
    )


def _window(point: Point, step: Callable[[], object], n: int) -> float:
    """Seconds `n` steps of `point` take under its settings, after one untimed step: the first
    step after another configuration's re-warms caches and threads, a cost that would fall
    unevenly on windows of different step counts."""
    device = torch.device(point.device)
    with _settings(point):
        step()  # switch in: not timed
        return time_window(step, device, n).wall_s
