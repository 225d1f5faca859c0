"""tune's search (speed mode): which configuration to measure next, for how long, and which
survive, as a pure function of the figures it is given, so that it can be followed (and tested
on simulated cost surfaces) without running a model.

A configuration is a *combo* (the competing settings other than batch size: precision, compile,
threads, ...) at a batch size. Where the user fixes the effective batch (issue 25), the size the
search orders is the micro-batch instead: a configuration then trains the effective batch as
effective / micro accumulated micro-batches, and "batch" below reads "micro-batch".

The search is successive halving over three rounds, each measuring ETA times longer than the
one before:

- round 0 (shortest): the batch size is bracketed on the first combo (the base): every other
  power of two from the largest down, then the two neighbours of the best, since on a curve that
  rises then flattens or falls the peak lies within one step of the best of every other step.
  Every other combo is measured at the base's best batch (one step smaller where that fails:
  a combo may need more memory). The best 1/ETA of the combos go on;
- round 1: each surviving combo climbs in batch from there (its neighbours, then on in the
  direction that gained, until PATIENCE steps past its best), measured longer. The best 1/ETA
  of all the configurations of round 1 (FINALISTS at the least) go on;
- round 2 (the sweep's own measurement): the finalists, measured as a sweep measures a point.

A figure of None is a configuration that could not run (out of memory: the cliff at the memory
limit; an error): it ranks below every figure. `should_stop` is asked before each measurement;
once it says stop, the search ends where it is and says so (`Outcome.stopped`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ETA = 3  # each round measures ETA times longer than the one before and keeps 1/ETA
ROUNDS = 3
PATIENCE = 2  # steps a climb in batch goes on past its best (a plateau loses by noise)
FINALISTS = 2  # the fewest configurations the last round measures (a leader and a rival)

# The competing settings other than batch size, as (axis, value) pairs in axis order.
Combo = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Config:
    """One configuration of the space: a combo at a batch size; with an `effective_batch`,
    `batch_size` is the micro-batch and the configuration accumulates effective / micro of
    them per optimizer step."""

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
    """What the search may measure: `combos` (the first is the base, whose batch curve is
    bracketed) times `batch_sizes` (ascending, distinct; micro-batches of `effective_batch`
    where that is set)."""

    combos: tuple[Combo, ...]
    batch_sizes: tuple[int, ...]
    effective_batch: int | None = None  # set: batch_sizes are micro-batches that divide it

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


# (configuration, round) -> samples/s, or None where it could not run.
Measure = Callable[[Config, int], float | None]

OUTCOMES = ("kept", "pruned", "final", "failed", "open")


@dataclass
class Trial:
    """One measurement: `config` in `round`, its samples/s (None: it could not run), and its
    outcome: `kept` (measured again in a later round), `pruned` (its round was decided without
    it), `final` (measured in the last round), `failed` (no figure), or `open` (the search
    stopped before deciding its round)."""

    number: int
    config: Config
    round: int
    samples_per_s: float | None
    outcome: str = "open"


@dataclass
class Outcome:
    """What the search measured, in order; the best configuration at the deepest round it
    reached (None where nothing ran); whether it was stopped, and in which round."""

    trials: list[Trial] = field(default_factory=list)
    best: Config | None = None
    best_samples_per_s: float | None = None
    rounds_decided: int = 0  # rounds whose survivors were chosen (ROUNDS: it ran to its end)
    stopped_in_round: int | None = None


class _Stop(Exception):
    """Raised inside the search when `should_stop` says stop before a measurement."""


def search(
    space: Space, measure: Measure, should_stop: Callable[[], bool] | None = None
) -> Outcome:
    """Run the search over `space`, measuring through `measure` (see the module docstring)."""
    s = _Searcher(space, measure, should_stop or (lambda: False))
    round_now = 0
    try:
        survivors = s.first_round()
        s.out.rounds_decided = 1
        round_now = 1
        finalists = s.second_round(survivors)
        s.out.rounds_decided = 2
        round_now = 2
        for config in finalists:
            s.measure(config, 2)
        s.out.rounds_decided = ROUNDS
    except _Stop:
        s.out.stopped_in_round = round_now
    s.settle()
    return s.out


class _Searcher:
    def __init__(self, space: Space, measure: Measure, should_stop: Callable[[], bool]) -> None:
        self.space = space
        self._measure = measure
        self._should_stop = should_stop
        self.out = Outcome()
        self.figures: dict[tuple[Config, int], float | None] = {}

    def measure(self, config: Config, rnd: int) -> float | None:
        if (config, rnd) in self.figures:
            return self.figures[(config, rnd)]
        if self._should_stop():
            raise _Stop
        value = self._measure(config, rnd)
        self.figures[(config, rnd)] = value
        self.out.trials.append(Trial(len(self.out.trials), config, rnd, value))
        return value

    def value(self, config: Config, rnd: int) -> float:
        """The figure for ranking: -inf where it did not run or was not measured."""
        v = self.figures.get((config, rnd))
        return -math.inf if v is None else v

    def first_round(self) -> list[tuple[Combo, int]]:
        """Round 0: bracket the batch on the base (the next combo where the base runs at no
        batch), screen every other combo there; the surviving combos and their batch index."""
        batches = self.space.batch_sizes
        at: dict[Combo, int] = {}
        anchor: int | None = None
        for combo in self.space.combos:
            if anchor is None:
                anchor = self._bracket(combo)
                if anchor is not None:
                    at[combo] = anchor
                continue
            for i in (anchor, anchor - 1):  # one step down where it does not fit
                if i >= 0 and self.measure(self.space.config(combo, batches[i]), 0) is not None:
                    at[combo] = i
                    break
        ranked = sorted(at, key=lambda c: -self.value(self.space.config(c, batches[at[c]]), 0))
        keep = max(1, math.ceil(len(self.space.combos) / ETA))
        return [(c, at[c]) for c in ranked[:keep]]

    def _bracket(self, combo: Combo) -> int | None:
        """The index of `combo`'s best batch in round 0: every other batch from the largest
        down, then both neighbours of the best (None: it ran at none)."""
        batches = self.space.batch_sizes
        n = len(batches)
        for i in sorted(range(n - 1, -1, -2)):
            self.measure(self.space.config(combo, batches[i]), 0)
        best = max(range(n), key=lambda i: self.value(self.space.config(combo, batches[i]), 0))
        if self.figures.get((self.space.config(combo, batches[best]), 0)) is None:
            return None
        for i in (best - 1, best + 1):
            if 0 <= i < n:
                self.measure(self.space.config(combo, batches[i]), 0)
        return max(range(n), key=lambda i: self.value(self.space.config(combo, batches[i]), 0))

    def second_round(self, survivors: list[tuple[Combo, int]]) -> list[Config]:
        """Round 1: each surviving combo climbs in batch from its round-0 batch; the best
        1/ETA of what was measured (FINALISTS at the least) go on, best first."""
        measured: list[Config] = []
        for combo, start in survivors:
            measured += self._climb(combo, start)
        ran = [c for c in measured if self.figures.get((c, 1)) is not None]
        ranked = sorted(dict.fromkeys(ran), key=lambda c: -self.value(c, 1))
        return ranked[: max(FINALISTS, math.ceil(len(ranked) / ETA))]

    def _climb(self, combo: Combo, start: int) -> list[Config]:
        """Measure `combo` in round 1 at batch index `start` and its neighbours, then on in the
        direction that gained while it gains; the configurations measured."""
        batches = self.space.batch_sizes
        done: list[int] = []

        def at(i: int) -> float:
            if i not in done:
                self.measure(self.space.config(combo, batches[i]), 1)
                done.append(i)
            return self.value(self.space.config(combo, batches[i]), 1)

        inside = [i for i in (start, start - 1, start + 1) if 0 <= i < len(batches)]
        best = max(inside, key=at)
        step = best - start
        here = best
        # on a plateau a step can lose by noise alone: go PATIENCE steps past the last gain
        while step and 0 <= here + step < len(batches) and abs(here + step - best) <= PATIENCE:
            here += step
            if at(here) > at(best):
                best = here
        return [self.space.config(combo, batches[i]) for i in done]

    def settle(self) -> None:
        """Each trial's outcome, and the best configuration at the deepest round reached."""
        later = {(t.config, r) for t in self.out.trials for r in range(t.round)}
        for t in self.out.trials:
            if t.samples_per_s is None:
                t.outcome = "failed"
            elif t.round == ROUNDS - 1:
                t.outcome = "final"
            elif (t.config, t.round) in later:
                t.outcome = "kept"
            elif t.round < self.out.rounds_decided:
                t.outcome = "pruned"
            else:
                t.outcome = "open"
        ran = [t for t in self.out.trials if t.samples_per_s is not None]
        if not ran:
            return
        deepest = max(t.round for t in ran)
        top = max((t for t in ran if t.round == deepest), key=lambda t: t.samples_per_s or 0.0)
        self.out.best, self.out.best_samples_per_s = top.config, top.samples_per_s


def round_scale(rnd: int) -> float:
    """The share of the sweep's measurement time a round's measurement takes: 1/ETA^2, 1/ETA,
    1 for rounds 0, 1, 2."""
    return float(ETA ** (rnd - (ROUNDS - 1)))
