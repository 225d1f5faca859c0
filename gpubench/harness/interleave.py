"""Interleaved re-measurement of a few configurations (the verdict's confirmation): each is
built and warmed once, then timed in short windows, one window each per round in rotating
order, so whatever else the machine does in those minutes falls on all of them alike.

Windows are bracketed by synchronisations and the host clock (a window holds several steps, so
one synchronisation per window costs little), each after one untimed step that switches the
machine over to its configuration; the same training step as the sweep's runs inside
(harness.step.prepare), under each configuration's precision, threads and options.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from gpubench import models
from gpubench.config import precision
from gpubench.config.model_options import decode
from gpubench.config.spec import Budget, Point
from gpubench.harness.step import cudnn_benchmark, prepare
from gpubench.harness.threads import intra_op_threads
from gpubench.harness.timing import steady, synchronize
from gpubench.probes import load
from gpubench.probes.current_device import made_current

# Warm-up of each configuration before the rounds: until its step times are steady by the
# sweep's own rule (harness.timing.steady), for at most this share of the budget between them
# all (and two steps at the least: the first compiles and creates the optimizer's state).
_WARMUP_SHARE = 0.5
_WARMUP_REL = Budget().warmup_steady_rel


@dataclass(frozen=True)
class Rounds:
    """`samples_per_s[c][r]`: configuration c's samples/s in round r; `window_steps[c]`: the
    steps in its first window (each next window is sized from the last one's pace);
    `setup_s`: building and warming them all; `seconds`: the whole re-measurement (setup
    included)."""

    samples_per_s: list[list[float]]
    window_steps: list[int]
    setup_s: float
    seconds: float
    other_load_cores: float | None  # other processes' load over the rounds
    busy: bool | None  # whether that load contended the rounds


@contextlib.contextmanager
def _settings(point: Point) -> Iterator[None]:
    """The process-wide settings a point's step runs under: threads, TF32, cudnn.benchmark,
    its device current."""
    with (
        intra_op_threads(point.threads),
        precision.tf32_mode(precision.get(point.precision).tf32),
        cudnn_benchmark(point.cudnn_benchmark),
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
) -> Rounds:
    """Build and warm each of `points`, then time them in rounds: as many as fit in `budget_s`
    seconds (setup included) with windows of about `window_s` seconds, at most `max_rounds`;
    where fewer than `min_rounds` fit, `min_rounds` with windows as short as the budget
    needs (one step at the least, so a budget spent on setup still takes min_rounds rounds
    of single steps). No round starts after `deadline_s` seconds: a machine that slowed may
    leave fewer than `min_rounds`."""
    started = time.perf_counter()
    steps: list[Callable[[], object]] = []
    estimates: list[float] = []
    for p in points:
        with _settings(p):
            torch.manual_seed(p.seed)
            workload = models.build(p.model, p.model_size, **decode(p.model_options))
            prepared = prepare(p, workload)
            device = torch.device(p.device)
            estimate = _warm(prepared.step, device, _WARMUP_SHARE * budget_s / len(points))
        steps.append(prepared.step)
        estimates.append(max(estimate, 1e-6))
    setup_s = time.perf_counter() - started
    # As many rounds of `window_s` windows as the budget left holds, up to max_rounds; where
    # it holds fewer than min_rounds, min_rounds of shorter windows (one step at the least).
    left = max(budget_s - setup_s, 0.0)
    switch_s = sum(estimates)  # each window's untimed first step, per round
    fit = int(left / (window_s * len(points) + switch_s))
    n_rounds = min(max(fit, min_rounds), max_rounds)
    if fit < min_rounds:
        window_s = max(left / min_rounds - switch_s, 0.0) / len(points)
    window_steps = [max(1, round(window_s / e)) for e in estimates]
    first_windows = list(window_steps)
    rates: list[list[float]] = [[] for _ in points]
    with load.OtherLoad() as others:
        for r in range(n_rounds):
            if time.perf_counter() - started > deadline_s:
                break
            for k in range(len(points)):
                c = (r + k) % len(points)  # rotate who goes first
                seconds = _window(points[c], steps[c], window_steps[c])
                rates[c].append(points[c].batch_size * window_steps[c] / seconds)
                # the next window's steps from this one's pace: a machine that grows busier
                # (or quieter) does not stretch (or shrink) the windows
                window_steps[c] = max(1, round(window_s * window_steps[c] / seconds))
    needed = max(load.needed_cores(p.device, p.threads or torch.get_num_threads()) for p in points)
    busy = load.contended(others.cores, needed, load.cores())
    return Rounds(rates, first_windows, setup_s, time.perf_counter() - started, others.cores, busy)


def _window(point: Point, step: Callable[[], object], n: int) -> float:
    """Seconds `n` steps of `point` take, between synchronisations, under its settings, after
    one untimed step: the first step after another configuration's re-warms the caches and
    the thread pool for this one, and where windows hold few steps (a budget spent on setup)
    and different counts, that cost would fall unevenly and favour the longer windows."""
    device = torch.device(point.device)
    with _settings(point):
        step()  # switch in: not timed
        synchronize(device)
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        synchronize(device)
        return time.perf_counter() - t0


def _warm(step: Callable[[], object], device: torch.device, max_s: float) -> float:
    """Run `step` until its times are steady, or `max_s` seconds passed after two steps; the
    last step's seconds."""
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < 2 or (
        not steady(times, _WARMUP_REL) and time.perf_counter() - started < max_s
    ):
        synchronize(device)
        t0 = time.perf_counter()
        step()
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return times[-1]
