"""What a search (gpubench.tune.search) is paced by against the wall clock: the pacer that
sizes its rounds (gpubench.tune.plan.Planner), and the two ways a measurement ends it early."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gpubench.tune.search import Space

# The competing settings other than batch size, as (axis, value) pairs in axis order.
Combo = tuple[tuple[str, Any], ...]


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
