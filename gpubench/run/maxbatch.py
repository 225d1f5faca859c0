"""The largest batch that fits: double the batch size until a step runs out of memory, then
binary-search the boundary, each probe a few real training steps in a fresh worker process.

A probe that fits in a few steps can still run out of memory over a full measurement (the
allocator fragments; a known fault of batch-size finders that stop at a short probe), so the
answer is confirmed by a full measurement, and stepped down to the next size that fitted if that
fails. Optionally every power of two up to the answer is timed to find the throughput-optimal
batch size, which is often smaller than the largest.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Budget, Point
from gpubench.run import memory_cap
from gpubench.run.worker import WorkerRunner

# A probe: one warm-up step, then this many measured steps (optimizer state exists after step 1).
PROBE_STEPS = 3
CEILING = 2**16
_FITS = ("ok", "diverged")  # a diverged loss still ran every step in memory


@dataclass(frozen=True)
class Probe:
    """One tried batch size: how it ended (a row status), why, and its wall time in seconds."""

    batch_size: int
    status: str
    error: str | None
    seconds: float
    phase: str  # "double", "search", "confirm" or "time"
    step_time_s: float | None = None
    samples_per_s: float | None = None

    @property
    def fits(self) -> bool:
        return self.status in _FITS


@dataclass
class MaxBatch:
    """The outcome of a search for `point` (its batch_size is ignored): `largest` is the largest
    batch size that fits and survived the confirming run (0: not even one sample fits).
    `stopped` says why the search ended early (an error, a timeout), else None."""

    point: Point
    largest: int
    probes: list[Probe] = field(default_factory=list)
    ceiling_reached: bool = False
    stopped: str | None = None
    best_batch: int | None = None  # throughput-optimal batch size, when timed

    @property
    def search_probes(self) -> list[Probe]:
        return [p for p in self.probes if p.phase in ("double", "search")]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.point.to_dict(),
            "largest_batch": self.largest,
            "best_batch": self.best_batch,
            "ceiling_reached": self.ceiling_reached,
            "stopped": self.stopped,
            "probes": [dataclasses.asdict(p) for p in self.probes],
        }


def find(
    point: Point,
    max_memory: int | None = None,
    point_timeout_s: float | None = None,
    start: int = 1,
    ceiling: int = CEILING,
    probe_steps: int = PROBE_STEPS,
    binary: bool = True,
    confirm_budget: Budget | None = None,
    time_budget: Budget | None = None,
    on_probe: Callable[[Probe], None] | None = None,
) -> MaxBatch:
    """Search the largest batch size of `point` that fits, between `start` and `ceiling`.

    With `binary=False` only the doubling runs (the answer is then the largest power-of-two
    multiple of `start` that fits). `confirm_budget` (None: no confirmation) measures the answer
    fully in a fresh process; `time_budget` times the powers of two up to it.
    """
    if not 1 <= start <= ceiling:
        raise ConfigError(f"invalid start batch size {start}; allowed: 1 to the ceiling {ceiling}")
    result = MaxBatch(point, 0)
    fresh = WorkerRunner(max_memory, point_timeout_s, reuse=False)

    def probe(batch: int, phase: str, budget: Budget) -> Probe:
        t0 = time.perf_counter()
        row = fresh.run(dataclasses.replace(point, batch_size=batch), budget)
        p = Probe(
            batch,
            row["status"],
            row["error"],
            time.perf_counter() - t0,
            phase,
            row["step_time_s"],
            row["samples_per_s"],
        )
        result.probes.append(p)
        if on_probe is not None:
            on_probe(p)
        if p.status == "unsupported":
            raise ConfigError(f"{point.label()} cannot run here: {p.error}")
        if not p.fits and p.status != "oom":
            result.stopped = f"B={batch} ended with {p.status}: {p.error}"
        return p

    try:
        short = Budget.fixed(probe_steps, warmup_steps=1)
        lo, hi = _double(probe, start, ceiling, short, result)
        if binary and result.stopped is None and hi is not None:
            lo = _bisect(probe, lo, hi, short, result)
        result.largest = lo
        if confirm_budget is not None and result.stopped is None:
            _confirm(probe, confirm_budget, result)
        if time_budget is not None and result.largest > 0:
            _time(probe, time_budget, result)
    finally:
        fresh.close()
    return result


def _double(
    probe: Callable[[int, str, Budget], Probe],
    start: int,
    ceiling: int,
    budget: Budget,
    result: MaxBatch,
) -> tuple[int, int | None]:
    """Largest size that fitted (0: none) and smallest that did not (None: none did)."""
    lo, batch = 0, start
    while True:
        p = probe(batch, "double", budget)
        if not p.fits:
            return lo, batch
        lo = batch
        if batch >= ceiling:
            result.ceiling_reached = True
            return lo, None
        batch = min(batch * 2, ceiling)


def _bisect(
    probe: Callable[[int, str, Budget], Probe], lo: int, hi: int, budget: Budget, result: MaxBatch
) -> int:
    while hi - lo > 1 and result.stopped is None:
        mid = (lo + hi) // 2
        if probe(mid, "search", budget).fits:
            lo = mid
        else:
            hi = mid
    return lo


def _confirm(probe: Callable[[int, str, Budget], Probe], budget: Budget, result: MaxBatch) -> None:
    """Measure the answer fully; when that runs out of memory, step down to the largest size
    below it that fitted a probe (halving when there is none) and try again."""
    while result.largest > 0:
        p = probe(result.largest, "confirm", budget)
        if p.fits:
            return
        if p.status != "oom":
            result.stopped = f"confirming B={result.largest} ended with {p.status}: {p.error}"
            return
        below = [q.batch_size for q in result.probes if q.fits and q.batch_size < p.batch_size]
        result.largest = max(below, default=p.batch_size // 2)


def _time(probe: Callable[[int, str, Budget], Probe], budget: Budget, result: MaxBatch) -> None:
    """Time every power of two up to the answer, and the answer (unless its confirming run
    timed it already), and record the batch size with the most samples per second."""
    timed = [p for p in result.probes if p.phase == "confirm" and p.fits]
    done = {p.batch_size for p in timed}
    for batch in sorted({*powers_of_two(result.largest), result.largest} - done):
        timed.append(probe(batch, "time", budget))
    fast = [p for p in timed if p.fits and p.samples_per_s is not None]
    if fast:
        result.best_batch = max(fast, key=lambda p: p.samples_per_s or 0.0).batch_size


def default_cap(device: str) -> int | None:
    """The memory cap (bytes) of a search that was given none: on the CPU the memory available
    now, so that doubling never drives the machine into swap; on CUDA none (the device's own
    memory is the limit)."""
    if not device.startswith("cpu"):
        return None
    available = memory_cap.available_bytes()
    if available is None:
        raise ConfigError(
            "cannot tell how much memory this machine has available; give --max-memory SIZE"
        )
    return available


def powers_of_two(limit: int) -> list[int]:
    """1, 2, 4, ... up to `limit` (just [1] when limit < 1, so the failure is still recorded)."""
    return [2**i for i in range(max(limit, 1).bit_length())]
