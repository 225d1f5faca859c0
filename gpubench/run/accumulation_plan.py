"""The fewest accumulation steps for a target effective batch: per checkpoint mode, the largest
micro-batch that fits (max-batch's search at accumulate 1), then the fewest equal micro-batches k
that fit, measured fully in a fresh process (the step holds every micro-batch's inputs and the
accumulated gradients, so it can fail where a micro-batch alone fitted; then the next k is
measured). Pure but for the search and the measurement it is given.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpubench.config.spec import Budget, Point
from gpubench.run import memory_cap
from gpubench.run.batch_search import FITS
from gpubench.run.maxbatch import MaxBatch
from gpubench.run.worker import WorkerRunner


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
    """`point` at accumulate 1, whose largest batch is `point`'s largest micro-batch (one
    search serves every accumulate value)."""
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
        return self.status in FITS


@dataclass
class Way:
    """One checkpoint mode: its search, and the full measurements of the target (`answer`: the
    first that fitted, None where none did or no target was given)."""

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
        answered = ("accumulate", "micro_batch", "samples_per_s", "memory_bytes")
        return {
            "checkpoint": self.checkpoint,
            "largest_micro_batch": self.largest_micro_batch,
            **{k: getattr(self.answer, k, None) for k in answered},
            "attempts": [dataclasses.asdict(a) for a in self.attempts],
            "search": self.search.to_dict(),
        }


@dataclass
class AccumulationPlan:
    """Per checkpoint mode, its Way; `fewest`: the mode needing the fewest steps (the first
    on a draw), None where none fitted."""

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
    """Per mode of `checkpoints`: `search` `point`'s largest micro-batch; with `target_batch`,
    `measure` (a full run's row) the target at the fewest steps that fit, then each next
    divisor while it runs out of memory (another ending stops the mode). `memory` reads a
    row's peak."""
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
    """`plan`, each target measured under `budget` in a fresh worker capped at `max_memory`."""
    with contextlib.closing(WorkerRunner(max_memory, point_timeout_s, reuse=False)) as fresh:
        return plan(
            point,
            target_batch,
            checkpoints,
            search,
            lambda p: fresh.run(p, budget),
            lambda row: memory_cap.capped_peak(row, point.device),
        )
