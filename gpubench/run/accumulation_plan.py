"""The fewest accumulation steps for a target effective batch (issue 25): for each checkpoint
mode, the largest micro-batch that fits (max-batch's memory-model search at accumulate 1, where
the batch is the micro-batch), and from it the fewest micro-batches k that split the target into
equal parts that fit. The target at that k is then measured fully in a fresh process: the step
holds the whole effective batch's inputs and accumulates into gradients that outlive a pass, so
a micro-batch that fitted alone can still fail inside the step; where it does, the next k is
measured.

Pure but for the two callables it is given (the search and the full measurement), so the plan
can be followed without running a model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpubench.config.spec import Budget, Point
from gpubench.run import memory_cap
from gpubench.run.maxbatch import MaxBatch
from gpubench.run.worker import WorkerRunner

_FITS = ("ok", "diverged")  # a diverged loss still ran every step in memory


def divisors(n: int) -> list[int]:
    """The whole numbers that divide `n` (at least 1), ascending."""
    return [k for k in range(1, n + 1) if n % k == 0]


def fewest_steps(target: int, largest_micro: int) -> int | None:
    """The fewest equal micro-batches `target` splits into with each at most `largest_micro`
    samples (None where not even one sample fits)."""
    if largest_micro < 1:
        return None
    return next(k for k in divisors(target) if target // k <= largest_micro)


def micro_point(point: Point) -> Point:
    """The point whose largest batch is `point`'s largest micro-batch: the same at accumulate 1
    (a search of `point` itself would probe batches that do not split into its micro-batches).
    Every accumulate value of one point shares it, so one search serves them all."""
    return dataclasses.replace(point, accumulate=1)


@dataclass
class Attempt:
    """A full measurement of the target in `accumulate` micro-batches: its row's status, error,
    samples/s (per effective sample) and the peak the memory cap counts (bytes)."""

    accumulate: int
    micro_batch: int
    status: str
    error: str | None = None
    samples_per_s: float | None = None
    memory_bytes: int | None = None

    @property
    def fits(self) -> bool:
        return self.status in _FITS


@dataclass
class Way:
    """One checkpoint mode's answer: the largest micro-batch that fits (`search.largest`), the
    fewest accumulation steps for the target that a full measurement confirmed (None: none
    fitted, or no target given) and the measurements that led there."""

    checkpoint: str
    search: MaxBatch
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def largest_micro_batch(self) -> int:
        return self.search.largest

    @property
    def answer(self) -> Attempt | None:
        return next((a for a in self.attempts if a.fits), None)

    def to_dict(self) -> dict[str, Any]:
        answer = self.answer
        return {
            "checkpoint": self.checkpoint,
            "largest_micro_batch": self.largest_micro_batch,
            "accumulate": None if answer is None else answer.accumulate,
            "micro_batch": None if answer is None else answer.micro_batch,
            "samples_per_s": None if answer is None else answer.samples_per_s,
            "memory_bytes": None if answer is None else answer.memory_bytes,
            "attempts": [dataclasses.asdict(a) for a in self.attempts],
            "search": self.search.to_dict(),
        }


@dataclass
class AccumulationPlan:
    """Per checkpoint mode, the largest micro-batch and (for `target_batch`) the fewest
    accumulation steps that fit; `fewest` is the mode whose answer needs the fewest steps
    (the first mode given on a draw), None where none fitted or no target was given."""

    target_batch: int | None
    ways: list[Way]

    @property
    def fewest(self) -> Way | None:
        fitted = [w for w in self.ways if w.answer is not None]
        return min(fitted, key=lambda w: w.answer.accumulate, default=None)  # type: ignore[union-attr]

    def to_dict(self) -> dict[str, Any]:
        fewest = self.fewest
        return {
            "target_batch": self.target_batch,
            "fewest": None
            if fewest is None or fewest.answer is None
            else {"checkpoint": fewest.checkpoint, "accumulate": fewest.answer.accumulate},
            "ways": [w.to_dict() for w in self.ways],
        }


def plan(
    point: Point,
    target_batch: int | None,
    checkpoints: Sequence[str],
    search: Callable[[Point], MaxBatch],
    measure: Callable[[Point], dict[str, Any]],
    memory: Callable[[dict[str, Any]], int | None] = lambda row: None,
) -> AccumulationPlan:
    """For each mode of `checkpoints`: `search` the largest micro-batch of `point` (at
    accumulate 1, with that mode); with a `target_batch`, `measure` (a full run, returning its
    row) the target at the fewest steps whose micro-batch fits, and at each next divisor while
    that runs out of memory. A measurement ending otherwise (an error, a timeout) stops that
    mode's attempts; its status is recorded. `memory` reads a row's peak."""
    ways = []
    for mode in checkpoints:
        found = search(dataclasses.replace(micro_point(point), checkpoint=mode))
        way = Way(mode, found)
        ways.append(way)
        first = fewest_steps(target_batch, found.largest) if target_batch is not None else None
        if target_batch is None or first is None:
            continue
        for k in (d for d in divisors(target_batch) if d >= first):
            micro = target_batch // k
            row = measure(
                dataclasses.replace(point, batch_size=target_batch, accumulate=k, checkpoint=mode)
            )
            sps = row.get("samples_per_s")
            attempt = Attempt(k, micro, str(row["status"]), row.get("error"), sps, memory(row))
            way.attempts.append(attempt)
            if attempt.status != "oom":
                break
    return AccumulationPlan(target_batch, ways)


def measured(
    point: Point,
    target_batch: int | None,
    checkpoints: Sequence[str],
    search: Callable[[Point], MaxBatch],
    max_memory: int | None,
    budget: Budget,
    point_timeout_s: float | None = None,
) -> AccumulationPlan:
    """`plan` with each target measured under `budget` in a fresh worker capped at
    `max_memory` bytes (as max-batch's confirming runs are), its peak read as the cap counts
    it."""
    fresh = WorkerRunner(max_memory, point_timeout_s, reuse=False)
    try:
        return plan(
            point,
            target_batch,
            checkpoints,
            search,
            lambda p: fresh.run(p, budget),
            lambda row: memory_cap.capped_peak(row, point.device),
        )
    finally:
        fresh.close()
