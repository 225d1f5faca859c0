"""The largest batch that fits, in a handful of probes, each a few real training steps in a fresh
worker process: the peak memory they measure (on the CPU the address space --max-memory caps, on
CUDA the allocator's peak reserved bytes) decides where the next goes (run.batch_search).

A probe that fits in a few steps can still run out of memory over a full measurement (the
allocator fragments), so the answer is confirmed by one, searching down with full runs where it
fails (batch_search.confirm). Optionally batches up to the answer are timed for the
throughput-optimal batch, often smaller than the largest, by the growth rule (science.growth):
from B=1 until throughput flattens or the answer is reached.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Budget, Point
from gpubench.run import batch_search, memory_cap
from gpubench.run.batch_search import Probe, resolution
from gpubench.store import wording

# A probe: one warm-up step, then this many measured steps (optimizer state exists after step 1).
PROBE_STEPS = 3
CEILING = 2**16
# A search given `seconds` plans on this many probes after the first: each may take its share;
# and its ceiling grows at most GROWTH-fold per stage (a step's time is known only below it).
PLANNED_PROBES = 4
GROWTH = 16
# issue 42: a probe predicted to take longer than this (its steps, by the step times of the
# probes below it) is not started: one probe at B=65,536 took 64.5 s on a 2-core CPU
PROBE_LIMIT_S = 20.0
# Two timings of one batch disagree where they differ by more than their intervals together,
# and at least this share (a short probe's few steps give no interval: the growth rule's floor)
TIMING_NOISE = 0.05


@dataclass
class MaxBatch:
    """A search's outcome for `point` (its batch_size ignored): `largest` fits and survived the
    confirming run (0: not one sample fits); `stopped`: why it ended early, else None."""

    point: Point
    largest: int
    probes: list[Probe] = field(default_factory=list)
    ceiling_reached: bool = False
    stopped: str | None = None
    best_batch: int | None = None  # throughput-optimal batch size, when timed
    limit_bytes: int | None = None  # the memory the search fitted against (None: unknown)
    # the answer is in [largest, largest + resolution); smallest_failed: None where none failed
    smallest_failed: int | None = None
    resolution: int = 1
    rank_saved_bytes: int = 0  # a rank holds this less than a probe (run.batch_plan)
    time_ceiling: int | None = None  # the largest batch the search's `seconds` reached

    @property
    def measured_none(self) -> bool:
        """Whether the search ended before any batch ran, for a reason other than memory (a
        probe that timed out or failed): nothing is known of what fits."""
        return self.largest == 0 and self.stopped is not None and self.smallest_failed is None

    @property
    def search_probes(self) -> list[Probe]:
        return [p for p in self.probes if p.phase in ("fit", "jump", "search")]

    @property
    def search_seconds(self) -> float:
        return sum(p.seconds for p in self.search_probes)

    def answer(self) -> str:
        """The answer in words: at the ceiling a ceiling ("more may fit", no resolution: nothing
        above it was tried); where the search stopped before anything ran out of memory, a
        lower bound; else the largest that fits, within the resolution, and the smallest that
        did not fit."""
        if self.largest == 0 and not self.measured_none:
            return "not even a batch of one fits"
        if self.largest == 0:
            return f"no batch size measured: {self.stopped}"
        if self.ceiling_reached:
            return (
                f"largest batch that fits: at least {self.largest}, the --ceiling (nothing "
                "above it was tried; more may fit)"
            )
        if self.stopped is not None and self.smallest_failed is None:
            return (
                f"largest batch that fits: at least {self.largest} (the search stopped "
                "before memory ended)"
            )
        within = "" if self.resolution <= 1 else f", within {self.resolution} samples"
        if self.smallest_failed is not None:
            within += f" ({self.smallest_failed} did not fit)"
        return f"largest batch that fits: {self.largest}{within}"

    def to_dict(self) -> dict[str, Any]:
        plain: tuple[str, ...] = ("best_batch", "ceiling_reached", "stopped", "smallest_failed")
        plain += ("resolution", "limit_bytes", "rank_saved_bytes", "time_ceiling")
        return {
            **self.point.to_dict(),
            "largest_batch": self.largest,
            **{k: getattr(self, k) for k in plain},
            "search_probe_count": len(self.search_probes),
            "search_seconds": self.search_seconds,
            "probes": [dataclasses.asdict(p) for p in self.probes],
            "timing_conflicts": timing_conflicts(self.probes),
        }


def timing_conflicts(probes: list[Probe]) -> list[str]:
    """Each batch timed twice (a search probe and a full run, say) whose step times differ by
    more than their 95% intervals together (at least TIMING_NOISE): the machine's speed
    changed between them, so neither alone is the batch's speed. In words, in batch order."""
    by_batch: dict[int, list[Probe]] = {}
    for p in probes:
        if p.fits and p.step_time_s:
            by_batch.setdefault(p.batch_size, []).append(p)
    out = []
    for batch, timed in sorted(by_batch.items()):
        fast = min(timed, key=lambda p: p.step_time_s or 0.0)
        slow = max(timed, key=lambda p: p.step_time_s or 0.0)
        a, b = fast.step_time_s or 0.0, slow.step_time_s or 0.0
        allowed = max(TIMING_NOISE, _ci(fast) + _ci(slow))
        if b > a * (1 + allowed):
            out.append(
                f"B={batch} timed twice, {wording.milliseconds(a)} ({fast.phase}) and "
                f"{wording.milliseconds(b)} ({slow.phase}) a step "
                f"({wording.times(b / a)}, beyond their intervals): the machine's speed changed "
                "between them; neither alone is this batch's speed"
            )
    return out


def _ci(p: Probe) -> float:
    c = p.step_time_ci_rel
    return c if c is not None and c == c and c != float("inf") else 0.0


def predicted_probe_s(probes: list[Probe], batch: int, steps: int) -> float | None:
    """The seconds `steps` training steps at `batch` are predicted to take, on the line through
    the step times of the two largest fitted probes (never flatter than 1/GROWTH of
    proportional growth); None where fewer than two were timed (one small probe's step is
    mostly fixed cost: in proportion to the batch it would bar every jump)."""
    timed = sorted(
        {p.batch_size: p.step_time_s for p in probes if p.fits and p.step_time_s}.items()
    )
    if len(timed) < 2:
        return None
    (b1, s1), (b2, s2) = timed[-2:]
    assert s1 is not None and s2 is not None
    slope = max((s2 - s1) / (b2 - b1), s2 / b2 / GROWTH)
    return steps * max(s2 + slope * (batch - b2), s2)


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
    rank_saving: Callable[[dict[str, Any]], int] | None = None,
    seconds: float | None = None,
    probe_limit_s: float | None = PROBE_LIMIT_S,
) -> MaxBatch:
    """Search the largest batch size of `point` that fits, between `start` and `ceiling`, to
    max(8, 2% of the answer) samples (1 with `exact`).

    `confirm_budget` (None: none) measures the answer fully in a fresh process, searching down
    with full runs where that runs out of memory. `time_budget` times the powers of two up to
    the answer. `rank_saving` (None: the point's own memory) searches for one rank of a
    parallel layout: `rank_saving(the first probe's row)` is the bytes a rank holds less, and
    the limit moves by that (run.batch_plan; without a cap only a negative saving applies).
    `seconds` (None: no limit) climbs in stages, each to the largest batch whose probe the step
    times so far say fits 1/PLANNED_PROBES of the seconds left; `result.time_ceiling` is where
    time stopped it. A search probe whose steps the step times so far predict to take over
    `probe_limit_s` (None: no bound) is not started: the search stops there, saying so.
    """
    if not 1 <= start <= ceiling:
        raise ConfigError(f"invalid start batch size {start}; allowed: 1 to the ceiling {ceiling}")
    result = MaxBatch(point, 0)
    last_row: list[dict[str, Any]] = []

    def probe(batch: int, phase: str, budget: Budget) -> Probe:
        t0 = time.perf_counter()
        row = fresh.run(dataclasses.replace(point, batch_size=batch), budget)
        last_row[:] = [row]
        p = Probe(
            batch,
            row["status"],
            row["error"],
            time.perf_counter() - t0,
            phase,
            row["step_time_s"],
            row["samples_per_s"],
            memory_cap.capped_peak(row, point.device),
            _sample_bytes(row, batch),
            row.get("step_time_ci_rel"),
        )
        result.probes.append(p)
        if on_probe is not None:
            on_probe(p)
        if p.status == "unsupported":
            raise ConfigError(f"{point.label()} cannot run here: {p.error}")
        if not p.fits and p.status != "oom":
            how = f"B={batch} ended with {p.status}: {p.error}"
            result.stopped = f"confirming {how}" if phase == "confirm" else how
        return p

    from gpubench.run.worker import WorkerRunner  # torch's: the parser reads CEILING here

    with contextlib.closing(WorkerRunner(max_memory, point_timeout_s, reuse=False)) as fresh:
        # a probe asks only whether the batch fits: no profile of where its time goes
        short = dataclasses.replace(Budget.fixed(probe_steps, warmup_steps=1), profile_steps=0)
        result.limit_bytes = max_memory if max_memory is not None else _device_bytes(point)
        first = None if rank_saving is None else probe(start, "fit", short)
        if rank_saving is not None and first is not None and first.fits:
            saved = rank_saving(last_row[0])
            if result.limit_bytes is not None and (max_memory is not None or saved < 0):
                result.rank_saved_bytes = saved
                result.limit_bytes = max(result.limit_bytes + saved, memory_cap.MIN_BYTES)
                fresh.max_memory = result.limit_bytes
            over = first.memory_bytes is None or first.memory_bytes > (result.limit_bytes or 0)
            if result.rank_saved_bytes < 0 and over:
                first = None  # it peaked over what a rank may hold: probed again under that

        known: dict[int, Probe] = {}

        def search_probe(batch: int, phase: str) -> Probe:
            nonlocal first
            if first is not None and batch == start:  # the first probe, made above
                known[batch], first = first, None
                return known[batch]
            if seconds is not None and batch in known:  # a timed search goes on from its top
                return known[batch]
            # issue 42: a probe predicted past the bound is not started (a warm-up step too)
            cost = predicted_probe_s(result.probes, batch, probe_steps + 1)
            if probe_limit_s is not None and cost is not None and cost > probe_limit_s:
                why = (
                    f"B={batch} not started: its {probe_steps + 1} steps would take about "
                    f"{wording.seconds(cost)}, over the {wording.seconds(probe_limit_s)} bound on "
                    "a probe"
                )
                result.stopped = why
                skipped = Probe(batch, "timeout", why, 0.0, "skipped")
                result.probes.append(skipped)
                return skipped
            known[batch] = probe(batch, phase, short)
            return known[batch]

        if seconds is None:
            probes = batch_search.search(search_probe, start, ceiling, result.limit_bytes, exact)
        else:
            probes = _timed_search(
                search_probe, start, ceiling, result, exact, seconds, probe_steps
            )
        full: list[Probe] = []
        if confirm_budget is not None and result.stopped is None:
            full = batch_search.confirm(
                lambda batch, phase: probe(batch, phase, confirm_budget), probes, exact
            )
        result.largest, result.smallest_failed = batch_search.bracket(probes, full)
        result.ceiling_reached = result.largest >= ceiling
        result.resolution = (
            result.smallest_failed - result.largest
            if result.smallest_failed is not None
            else resolution(result.largest, exact)
        )
        if time_budget is not None and result.largest > 0:
            _time(probe, time_budget, result)
    return result


def _timed_search(
    probe: Callable[[int, str], Probe],
    start: int,
    ceiling: int,
    result: MaxBatch,
    exact: bool,
    seconds: float,
    probe_steps: int,
) -> list[Probe]:
    """batch_search.search in stages, each up to what the seconds left afford (`_affordable`),
    until memory decides (a stage fails below its top) or time does."""
    probes = [probe(start, "fit")]
    began = time.perf_counter()  # the first probe's worker start-up is paid whatever the limit
    low = start
    while True:
        left = seconds - (time.perf_counter() - began)
        top = min(ceiling, _affordable(probes, left, probe_steps, low))
        if top <= low:
            result.time_ceiling = low if low < ceiling else None
            return probes
        stage = batch_search.search(probe, low, top, result.limit_bytes, exact)
        probes += [p for p in stage if p not in probes]
        if batch_search.largest_fitted(stage) < top or not stage[-1].fits:
            return probes
        low = top


def _affordable(probes: list[Probe], seconds: float, probe_steps: int, low: int) -> int:
    """The largest batch (`low` to GROWTH x `low`) whose probe (a warm-up step and
    `probe_steps`) takes at most `seconds` / PLANNED_PROBES, by the line through the two
    largest fitted probes' step times; with one, a step time in proportion to the batch and
    all of `seconds`, so that the second probe tells the line."""
    points = sorted((p.batch_size, p.step_time_s) for p in probes if p.fits and p.step_time_s)
    if not points:
        return low
    if len(points) == 1:  # the second probe may take all the time: it tells the slope
        b, step_s = points[0]
        return max(low, min(int(b * seconds / ((probe_steps + 1) * step_s)), low * GROWTH))
    per_step = seconds / PLANNED_PROBES / (probe_steps + 1)
    (b1, s1), (b2, s2) = points[-2:]
    slope = max((s2 - s1) / (b2 - b1), s2 / b2 / GROWTH)  # never flatter than this
    most = int(b2 + (per_step - s2) / slope)
    return max(low, min(most, low * GROWTH))


def _sample_bytes(row: dict[str, Any], batch: int) -> float | None:
    """What one sample is estimated to cost: the activations it saved for backward and its
    share of the batches the point holds (None where the probe measured neither)."""
    saved, held = row.get("memory_activations_bytes"), row.get("memory_inputs_bytes")
    if not saved and not held:
        return None
    return ((saved or 0) + (held or 0)) / batch


def _device_bytes(point: Point) -> int | None:
    """A CUDA device's total memory (None on the CPU or where NVML cannot tell), from NVML so
    that this process makes no CUDA context."""
    if not point.device.startswith("cuda"):
        return None
    from gpubench.probes import nvml

    if nvml.unavailable_reason() is not None:
        return None
    index = int(point.device.split(":")[1]) if ":" in point.device else 0
    total = nvml.Device(index).info().get("memory_total_bytes")
    return int(total) if total is not None else None


def _time(probe: Callable[[int, str, Budget], Probe], budget: Budget, result: MaxBatch) -> None:
    """Time batches from 1 up to the answer by the growth rule (science.growth: doubling, 4-fold
    where the step time is flat, refined near the knee, stopping where throughput flattens or
    at the answer), a batch the confirming run timed already not again, and record the batch
    size with the most samples per second."""
    timed = {p.batch_size: p for p in result.probes if p.phase == "confirm" and p.fits}
    seen: list[Probe] = []
    batch: int | None = 1
    while batch is not None:
        done = timed.get(batch)
        seen.append(done if done is not None else probe(batch, "time", budget))
        from gpubench.science import growth

        batch = growth.decide([_as_row(p) for p in seen], None, ceiling=result.largest).batch
    fast = [p for p in seen if p.fits and p.samples_per_s is not None]
    if fast:
        result.best_batch = max(fast, key=lambda p: p.samples_per_s or 0.0).batch_size


def _as_row(p: Probe) -> dict[str, Any]:
    """A probe as the growth rule reads a row."""
    return {
        "batch_size": p.batch_size,
        "status": "ok" if p.fits else p.status,
        "samples_per_s": p.samples_per_s,
        "step_time_s": p.step_time_s,
        "step_time_ci_rel": p.step_time_ci_rel,
        "point_time_s": p.seconds,
    }


def default_cap(device: str) -> int | None:
    """A search's cap without --max-memory: on the CPU the memory available now (never into
    swap); on CUDA None (the device is the limit)."""
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
