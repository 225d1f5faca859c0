"""The largest batch that fits, in a handful of probes, each a few real training steps in a
fresh worker process.

The probes measure peak memory (on the CPU the worker's peak address space, which
--max-memory caps; on CUDA the caching allocator's peak reserved bytes), and memory grows
linearly with the batch: fixed (weights, gradients, optimizer state, the runtime) plus a cost
per sample (activations). The search fits that line from its first small probes (growing the
batch 32-fold until the growth is measurable), jumps to just under the batch the line predicts
at the limit, then brackets the boundary from there and narrows it to a resolution: a multiple
of 8 or 2% of the answer, whichever is coarser (`exact`: one sample). Where memory is not
measured, or the limit unknown, it doubles and bisects instead.

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
GROW = 32  # the batch's growth between fitting probes while memory has not grown measurably
UNDER = 0.03  # the jump lands this fraction of the predicted headroom under the limit
RESOLUTION_SAMPLES = 8  # the answer's resolution: this many samples or 2%, whichever is coarser
RESOLUTION_FRACTION = 0.02


@dataclass(frozen=True)
class Probe:
    """One tried batch size: how it ended (a row status), why, and its wall time in seconds."""

    batch_size: int
    status: str
    error: str | None
    seconds: float
    phase: str  # "fit", "jump", "search", "confirm" or "time"
    step_time_s: float | None = None
    samples_per_s: float | None = None
    memory_bytes: int | None = None  # the peak that --max-memory limits (None: not measured)

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
    limit_bytes: int | None = None  # the memory the search fitted against (None: unknown)
    resolution: int = 1  # samples: the answer is within this of the largest that fits

    @property
    def search_probes(self) -> list[Probe]:
        return [p for p in self.probes if p.phase in ("fit", "jump", "search")]

    @property
    def search_seconds(self) -> float:
        return sum(p.seconds for p in self.search_probes)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.point.to_dict(),
            "largest_batch": self.largest,
            "best_batch": self.best_batch,
            "ceiling_reached": self.ceiling_reached,
            "stopped": self.stopped,
            "resolution": self.resolution,
            "limit_bytes": self.limit_bytes,
            "search_probe_count": len(self.search_probes),
            "search_seconds": self.search_seconds,
            "probes": [dataclasses.asdict(p) for p in self.probes],
        }


def find(
    point: Point,
    max_memory: int | None = None,
    point_timeout_s: float | None = None,
    start: int = 1,
    ceiling: int = CEILING,
    probe_steps: int = PROBE_STEPS,
    exact: bool = False,
    confirm_budget: Budget | None = None,
    time_budget: Budget | None = None,
    on_probe: Callable[[Probe], None] | None = None,
) -> MaxBatch:
    """Search the largest batch size of `point` that fits, between `start` and `ceiling`.

    The answer is within `result.resolution` samples of the largest batch that fits: max(8,
    2% of it), or 1 with `exact`. `confirm_budget` (None: no confirmation) measures the answer
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
            _memory(row, point.device),
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
        # a probe asks only whether the batch fits: no profile of where its time goes
        short = dataclasses.replace(Budget.fixed(probe_steps, warmup_steps=1), profile_steps=0)
        result.limit_bytes = max_memory if max_memory is not None else _device_bytes(point)
        result.largest = _search(probe, start, ceiling, short, result, exact)
        if confirm_budget is not None and result.stopped is None:
            _confirm(probe, confirm_budget, result)
        if time_budget is not None and result.largest > 0:
            _time(probe, time_budget, result)
    finally:
        fresh.close()
    return result


def _search(
    probe: Callable[[int, str, Budget], Probe],
    start: int,
    ceiling: int,
    budget: Budget,
    result: MaxBatch,
    exact: bool,
) -> int:
    """The largest batch that fitted a probe, once the smallest that did not is within the
    resolution of it (or the ceiling fitted, or a probe failed otherwise)."""
    lo, hi, batch, phase = 0, None, start, "fit"
    while True:
        p = probe(batch, phase, budget)
        if result.stopped is not None:
            return lo
        if p.fits:
            lo = max(lo, batch)
            if lo >= ceiling:
                result.ceiling_reached = True
                return lo
        else:
            hi = batch if hi is None else min(hi, batch)
        result.resolution = resolution(lo, exact)
        if hi is not None and hi - lo <= result.resolution:
            return lo
        batch, phase = _next(result, lo, hi, ceiling, exact)


def resolution(largest: int, exact: bool) -> int:
    """Samples the answer may be short of the largest batch that fits."""
    if exact:
        return 1
    return max(RESOLUTION_SAMPLES, int(RESOLUTION_FRACTION * largest))


def _next(result: MaxBatch, lo: int, hi: int | None, ceiling: int, exact: bool) -> tuple[int, str]:
    """The next batch to probe, and its phase, from what the probes so far say."""
    line = memory_line(result.probes)
    limit = result.limit_bytes
    r = resolution(lo, exact)
    at_limit = None if line is None or limit is None else line.batch_at(limit)
    if hi is None:
        if line is None or limit is None or at_limit is None or not line.measurable(limit):
            grow = GROW if line is not None or _measured(result.probes) else 2
            return min(max(lo * grow, lo + 1), ceiling), "fit"
        under = int(line.batch_at(limit - UNDER * (limit - line.fixed)))
        if not any(p.phase == "jump" for p in result.probes) and under > lo + r:
            # the line comes from small batches: jump to just under the limit it predicts
            return min(_rounded(under, lo, exact), ceiling), "jump"
        # the line now runs through a batch near the limit: probe at the limit it predicts, or
        # just past the resolution to close the bracket
        return min(max(lo + r + 1, _rounded(int(at_limit), lo, exact)), ceiling), "search"
    if at_limit is not None and lo + r < at_limit < hi - r:
        return _rounded(int(at_limit), lo, exact), "search"
    # the line says the boundary is outside the bracket (it was fitted on batches too small to
    # show the per-sample cost): bisect, and refit on the batches that fit
    return _rounded((lo + hi) // 2, lo, exact), "search"


def _rounded(batch: int, lo: int, exact: bool) -> int:
    """`batch` down to a multiple of 8 where that stays above `lo` (people train at those)."""
    down = batch - batch % RESOLUTION_SAMPLES
    return down if not exact and down > lo else batch


def _measured(probes: list[Probe]) -> bool:
    return any(p.memory_bytes is not None for p in probes if p.fits)


@dataclass(frozen=True)
class MemoryLine:
    """Peak memory (bytes) = fixed + per_sample x batch, through two probes that fitted."""

    fixed: float
    per_sample: float
    growth: float  # bytes between the two probes it was fitted through

    def batch_at(self, memory: float) -> float:
        return (memory - self.fixed) / self.per_sample

    def measurable(self, limit: int) -> bool:
        """Whether the growth it was fitted on is large enough to extrapolate: at least 1% of
        the headroom and 2 MiB (allocator and page rounding are smaller than that)."""
        return self.growth >= max(2 * 2**20, 0.01 * (limit - self.fixed))


def memory_line(probes: list[Probe]) -> MemoryLine | None:
    """The line through the two largest fitted probes with measured memory (those nearest the
    limit), or None where there are not two or memory did not grow between them."""
    fitted = sorted(
        {p.batch_size: p.memory_bytes for p in probes if p.fits and p.memory_bytes}.items()
    )
    if len(fitted) < 2:
        return None
    (b1, m1), (b2, m2) = fitted[-2:]
    if m2 <= m1:
        return None
    slope = (m2 - m1) / (b2 - b1)
    return MemoryLine(m2 - slope * b2, slope, m2 - m1)


def _memory(row: dict[str, Any], device: str) -> int | None:
    """The probe's peak of what the memory limit counts: the worker's address space on the CPU
    (it ran in a fresh process, so the peak is the point's), the allocator's reserved bytes on
    CUDA."""
    key = (
        "host_peak_address_space_bytes" if device.startswith("cpu") else "torch_peak_reserved_bytes"
    )
    value = row.get(key)
    return int(value) if value is not None else None


def _device_bytes(point: Point) -> int | None:
    """A CUDA device's total memory from NVML (None where NVML cannot tell, or on the CPU): the
    limit when no cap is given. Asked of NVML so that this process makes no CUDA context."""
    if not point.device.startswith("cuda"):
        return None
    from gpubench.probes import nvml

    if nvml.unavailable_reason() is not None:
        return None
    index = int(point.device.split(":")[1]) if ":" in point.device else 0
    total = nvml.Device(index).info().get("memory_total_bytes")
    return int(total) if total is not None else None


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
