"""What a search (gpubench.tune.search) works in and is paced by: a configuration and the space
of them, the pacer that sizes its rounds against the wall clock (gpubench.tune.plan.Planner),
and the two ways a measurement ends it early."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

# The competing settings other than batch size, as (axis, value) pairs in axis order.
Combo = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Config:
    """A combo at a batch size (the micro-batch where `effective_batch` is set)."""

    combo: Combo
    batch_size: int
    effective_batch: int | None = None

    def settings(self) -> dict[str, Any]:
        """The configuration as Point fields: the batch, and where accumulated, its steps."""
        if self.effective_batch is None:
            return {**dict(self.combo), "batch_size": self.batch_size}
        steps = self.effective_batch // self.batch_size
        return {**dict(self.combo), "batch_size": self.effective_batch, "accumulate": steps}


@dataclass(frozen=True)
class Space:
    """`combos` (the first is the base) times `batch_sizes` (ascending, distinct; micro-batches
    of `effective_batch` where that is set)."""

    combos: tuple[Combo, ...]
    batch_sizes: tuple[int, ...]
    effective_batch: int | None = None  # set: batch_sizes are micro-batches that divide it
    # (checkpoint mode, the largest batch it fits) where max-batch searched it; () where not
    largest: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        assert self.combos and self.batch_sizes, "an empty space"
        assert list(self.batch_sizes) == sorted(set(self.batch_sizes)), self.batch_sizes
        e = self.effective_batch
        assert e is None or all(e % b == 0 for b in self.batch_sizes), (e, self.batch_sizes)

    def config(self, combo: Combo, batch_size: int) -> Config:
        return Config(combo, batch_size, self.effective_batch)

    @property
    def size(self) -> int:
        """Configurations in the space (what the full grid would measure)."""
        return len(self.combos) * len(self.batch_sizes)

    def fit_index(self, combo: Combo) -> int:
        """The index of the largest batch `combo`'s checkpoint mode fits (the last where the
        space does not know)."""
        limit = dict(self.largest).get(dict(combo).get("checkpoint", "none"))
        if limit is None:
            return len(self.batch_sizes) - 1
        inside = [i for i, b in enumerate(self.batch_sizes) if b <= limit]
        return inside[-1] if inside else 0


class Cut(Exception):
    """Raised by a `measure` the deadline cut short, with its figure (recorded, never ranked)."""

    def __init__(self, samples_per_s: float | None) -> None:
        super().__init__("cut by the deadline")
        self.samples_per_s = samples_per_s


class Pacer(Protocol):
    """What sizes the rounds to a budget (gpubench.tune.plan.Planner): whether round 0 measures
    every configuration (`halving`: the trials planned per round); a round begins with `trials`
    (their combos) planned, `later` in each round after; whether it has room for one more (of
    `combo` at `batch_size`)."""

    def measure_all(self, space: Space, halving: list[int]) -> bool: ...

    def begin(self, rnd: int, trials: list[Combo], later: list[int]) -> None: ...

    def room(self, rnd: int, combo: Combo, batch_size: int) -> bool: ...


class Stop(Exception):
    """Ends the search where it is: raised when `should_stop` says stop before a measurement,
    or by a `measure` that will not start one (no time left for it)."""
