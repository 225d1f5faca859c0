"""tune's search (speed mode) as a pure function of the figures it is given: which configuration
to measure next, for how long, and which survive. A configuration is a *combo* (the competing
settings other than batch size) at a batch size; with a fixed effective batch (issue 25) the
size is the micro-batch, accumulated effective / micro times.

Successive halving over ROUNDS rounds, each measuring ETA times longer than the one before:
round 0 brackets the batch on the base combo at every other power of two from the largest it
fits down (a curve that rises then flattens or falls peaks within one step of the best of every
other step), refines the base's best by its neighbours, then screens every other combo at the
base's refined best (a checkpoint mode that fits a larger batch at the largest only it fits);
round 1 climbs each survivor's batch both ways, larger batches first, PATIENCE steps past the
last reading not clearly below the one before it (a reading within the round's noise of its
neighbour is a plateau, not a fall; a recorded curve has bumps a one-way climb stops at);
round 2 measures the finalists as a sweep measures a point.

A round keeps what is within its margin of its leader: the verdict's MARGIN widened by
1/sqrt(share) of a sweep's measuring time (3 x MARGIN in round 0, sqrt(3) x in round 1), so a
flat optimum keeps every configuration the round cannot tell from its leader.

A figure of None (out of memory, an error) ranks below every figure. Once `should_stop` says
stop, or `measure` raises Cut (recorded as `cut`, never ranked), the search ends where it is.
A `pacer` (gpubench.tune.plan) fits the rounds to a wall-clock budget: combos are screened in
the space's order, each round measures while its share has room, and where measuring the whole
space costs no more than the halving, round 0 measures all of it (`Outcome.measure_all`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpubench.config import labels
from gpubench.science.leaders import MARGIN
from gpubench.store.wording import number

ETA = 3  # each round measures ETA times longer than the one before and keeps 1/ETA
ROUNDS = 3
PATIENCE = 2  # steps a climb in batch goes on past its best (a plateau loses by noise)
FINALISTS = 2  # the fewest configurations the last round measures (a leader and a rival)
# A combo whose first trial reads under 1/DROP of the best so far (fp16 on a CPU: emulated) is
# dropped at once, with its reason, and never measured again: no noise makes up a factor of ten.
DROP = 10


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
    every configuration (`halving`: the trials planned per round), and whether it still does
    once trials showed what they cost (`left`: the configurations not measured); a round
    begins with `trials` (their combos) planned, `later` in each round after; whether it has
    room for one more (of `combo` at `batch_size`)."""

    def measure_all(self, space: Space, halving: list[int]) -> bool: ...

    def still_measure_all(self, left: list[Config]) -> bool: ...

    def begin(self, rnd: int, trials: list[Combo], later: list[int]) -> None: ...

    def room(self, rnd: int, combo: Combo, batch_size: int) -> bool: ...


class Stop(Exception):
    """Ends the search where it is: raised when `should_stop` says stop before a measurement,
    or by a `measure` that will not start one (no time left for it)."""


# (configuration, round) -> samples/s, or None where it could not run.
Measure = Callable[[Config, int], float | None]

CLIMB_TRIALS = 5  # trials a surviving combo is planned to take in round 1 (it, 2 each way)


@dataclass
class Trial:
    """One measurement: `config` in `round`, its samples/s (None: it could not run), and its
    outcome (kept, pruned, final, failed, open or cut: store.tune_record.TrialRecord says which)."""

    number: int
    config: Config
    round: int
    samples_per_s: float | None
    outcome: str = "open"


@dataclass
class Outcome:
    """The trials in order; the best configuration at the deepest round reached (None where
    nothing ran); the round it was stopped in (None: it ran to its end)."""

    trials: list[Trial] = field(default_factory=list)
    best: Config | None = None
    best_samples_per_s: float | None = None
    rounds_decided: int = 0  # rounds whose survivors were chosen (ROUNDS: it ran to its end)
    stopped_in_round: int | None = None
    measure_all: bool = False  # round 0 measured every configuration (no bracket, no screen)
    dropped: dict[Combo, str] = field(default_factory=dict)  # combo -> why (DROP)


def search(
    space: Space,
    measure: Measure,
    should_stop: Callable[[], bool] | None = None,
    pacer: Pacer | None = None,
    note: Callable[[str], None] | None = None,
) -> Outcome:
    """Run the search over `space`, measuring through `measure` (the module docstring);
    `note` is told, as it happens, why a combo was dropped (DROP)."""
    s = _Searcher(space, measure, should_stop or (lambda: False), pacer, note)
    try:
        s.out.measure_all = pacer is not None and pacer.measure_all(space, s.planned_counts())
        survivors = s.first_round()
        s.out.rounds_decided = 1
        finalists = s.second_round(survivors)
        s.out.rounds_decided = 2
        s.final_round(finalists)
        s.out.rounds_decided = ROUNDS
    except Stop:
        s.out.stopped_in_round = s.out.rounds_decided  # the round it was in
    s.settle()
    return s.out


@dataclass
class _Searcher:
    space: Space
    _measure: Measure
    _should_stop: Callable[[], bool]
    pacer: Pacer | None
    note: Callable[[str], None] | None = None
    out: Outcome = field(default_factory=Outcome)
    figures: dict[tuple[Config, int], float | None] = field(default_factory=dict)

    def measure(self, config: Config, rnd: int) -> float | None:
        if (config, rnd) in self.figures:
            return self.figures[(config, rnd)]
        if self._should_stop():
            raise Stop
        number = len(self.out.trials)
        try:
            value = self._measure(config, rnd)
        except Cut as cut:
            self.out.trials.append(Trial(number, config, rnd, cut.samples_per_s, "cut"))
            raise Stop from None
        self.figures[(config, rnd)] = value
        self.out.trials.append(Trial(number, config, rnd, value))
        return value

    def dropped(self, combo: Combo) -> bool:
        """Whether `combo` is dropped: the best its trials read is under 1/DROP of another
        combo's best (said to `note` once, and kept in the outcome with the figures)."""
        if combo in self.out.dropped:
            return True
        ran = [t for t in self.out.trials if t.samples_per_s is not None and t.outcome != "cut"]
        mine = [t.samples_per_s or 0.0 for t in ran if t.config.combo == combo]
        others = [t.samples_per_s or 0.0 for t in ran if t.config.combo != combo]
        if not mine or not others or max(mine) * DROP >= max(others):
            return False
        name = labels.settings(dict(combo))
        why = (
            f"{name} dropped: it read {number(max(mine))} samples/s, under 1/{DROP} of the best "
            f"so far ({number(max(others))}); not measured further"
        )
        self.out.dropped[combo] = why
        if self.note is not None:
            self.note(why)
        return True

    def room(self, rnd: int, config: Config) -> bool:
        """Whether the pacer lets round `rnd` measure `config` (free where it was measured)."""
        if self.pacer is None or (config, rnd) in self.figures:
            return True
        return self.pacer.room(rnd, config.combo, config.batch_size)

    def begin(self, rnd: int, trials: list[Combo], later: list[int]) -> None:
        if self.pacer is not None:
            self.pacer.begin(rnd, trials, later)

    def value(self, config: Config, rnd: int) -> float:
        """The figure for ranking: -inf where it did not run or was not measured."""
        return self.figures.get((config, rnd)) or -math.inf

    def _bracket_order(self, combo: Combo) -> list[int]:
        """Round 0's batch indices for `combo`: every other one from the largest it fits down."""
        return sorted(range(self.space.fit_index(combo), -1, -2))

    def planned_counts(self) -> list[int]:
        """The trials the halving plans per round (bracket and screens, climbs, finalists)."""
        n0 = len(self._bracket_order(self.space.combos[0])) + 2 + len(self.space.combos) - 1
        n1 = CLIMB_TRIALS * max(1, math.ceil(len(self.space.combos) / ETA))
        return [n0, n1, max(FINALISTS, math.ceil(n1 / ETA))]

    def first_round(self) -> list[tuple[Combo, int]]:
        """Round 0 (the module docstring; the base is the next combo where it runs at no
        batch): the surviving combos and their batch index."""
        batches = self.space.batch_sizes
        combos = self.space.combos
        plan = [combos[0]] * (len(self._bracket_order(combos[0])) + 2) + list(combos[1:])
        if self.out.measure_all:
            self.begin(0, [c for c in combos for _ in batches], self.planned_counts()[1:])
            measured = self._measure_all(combos)
            if measured is not None:
                return self._survivors(measured)
            # the trials cost more than planned: the halving goes on from what they measured
            self.out.measure_all = False
        self.begin(0, plan, self.planned_counts()[1:])
        at: dict[Combo, int] = {}
        anchor: int | None = None
        anchor_fit = 0
        for combo in combos:
            if anchor is None:
                anchor = self._screen(combo, self._bracket_order(combo), first=True)
                if anchor is not None:  # refined by its neighbours before the screens: a
                    # bracket read noisily (a CPU's B=16 over B=64 by 14%) would screen
                    # every setting at a batch too small to tell them apart
                    refined = self._screen(combo, (anchor - 1, anchor + 1))
                    anchor = anchor if refined is None else refined
                    at[combo] = anchor
                    anchor_fit = self.space.fit_index(combo)
                continue
            fit = self.space.fit_index(combo)
            first = fit if fit > anchor_fit else anchor  # fits only with it: screened there
            for i in (first, first - 1):  # one step down where it does not fit
                if i < 0 or not self.room(0, self.space.config(combo, batches[i])):
                    break
                if self.measure(self.space.config(combo, batches[i]), 0) is not None:
                    if not self.dropped(combo):
                        at[combo] = i
                    break
        return self._survivors(at)

    def _survivors(self, at: dict[Combo, int]) -> list[tuple[Combo, int]]:
        """The combos within round 0's margin of its leader by their figure at batch index
        `at[combo]` (1/ETA of the combos that ran at the least), best first."""
        batches = self.space.batch_sizes
        at = {c: i for c, i in at.items() if not self.dropped(c)}  # by a later, faster one
        figure = {c: self.value(self.space.config(c, batches[at[c]]), 0) for c in at}
        # of the combos that ran (all but a short round's unscreened and the failed)
        fewest = max(1, math.ceil(min(len(at), len(self.space.combos)) / ETA))
        return [(c, at[c]) for c in _kept(figure, 0, fewest, len(at))]

    def _measure_all(self, combos: tuple[Combo, ...]) -> dict[Combo, int] | None:
        """Round 0 over every configuration breadth first, from the smallest batch up (each
        combo at its smallest, then one step up, ...) while the round has room: a round cut
        short has screened every setting (one combo's whole curve first left an H100 tune with
        fp32 alone), and a batch is priced from the smaller ones measured before it (a CPU
        tune that began at B=1024, 30 s a trial, measured nothing else). Each combo's best
        batch index, where it ran; None where, after a trial, the configurations left no
        longer fit the time left at what trials cost (the pacer's still_measure_all: a CPU's
        torch.compile took 20-35 s per batch where nothing had priced it)."""
        fits = {c: self.space.fit_index(c) for c in combos}
        order = [(c, i) for i in range(max(fits.values()) + 1) for c in combos if i <= fits[c]]
        for n, (c, i) in enumerate(order):
            if self.dropped(c):
                continue
            config = self.space.config(c, self.space.batch_sizes[i])
            if self.figures and self.pacer is not None:
                left = [
                    self.space.config(k, self.space.batch_sizes[j])
                    for k, j in order[n:]
                    if not self.dropped(k)
                ]
                if not self.pacer.still_measure_all(left):
                    return None
            if not self.figures or self.room(0, config):
                self.measure(config, 0)
        ran = {c: self._best_at(c) for c in combos if not self.dropped(c)}
        return {c: i for c, i in ran.items() if i is not None}

    def _best_at(self, combo: Combo) -> int | None:
        """`combo`'s best batch index in round 0 (None: it ran at none)."""
        batches = self.space.batch_sizes
        n = self.space.fit_index(combo) + 1
        best = max(range(n), key=lambda i: self.value(self.space.config(combo, batches[i]), 0))
        ran = self.figures.get((self.space.config(combo, batches[best]), 0)) is not None
        return best if ran else None

    def _screen(self, combo: Combo, indices: Iterable[int], first: bool = False) -> int | None:
        """Measure `combo` in round 0 at the batch `indices` it fits while the round has room
        (the first always where `first`); its best batch index so far (None: it ran at none)."""
        batches = self.space.batch_sizes
        n = self.space.fit_index(combo) + 1
        for k, i in enumerate(j for j in indices if 0 <= j < n):
            config = self.space.config(combo, batches[i])
            if (first and k == 0) or self.room(0, config):
                self.measure(config, 0)
            if self.dropped(combo):
                return None
        return self._best_at(combo)

    def second_round(self, survivors: list[tuple[Combo, int]]) -> list[Config]:
        """Round 1: each survivor climbs in batch from its round-0 batch (the starts of the best
        1/ETA of the combos always measured, the rest while the round has room), the best start
        first; the finalists."""
        later = [max(FINALISTS, math.ceil(CLIMB_TRIALS * len(survivors) / ETA))]
        self.begin(1, [c for c, _ in survivors for _ in range(CLIMB_TRIALS)], later)
        always = math.ceil(len(self.space.combos) / ETA)  # what the pacer keeps room for
        starts = [self.space.config(c, self.space.batch_sizes[i]) for c, i in survivors]
        for n, config in enumerate(starts):
            if n < always or self.room(1, config):
                self.measure(config, 1)
        # by the round's own, longer reading of the starts: round 0 put a cnn's compiled bf16
        # third, round 1 read it first by 36%, and the climbs before it left it no room
        order = sorted(range(len(survivors)), key=lambda n: -self.value(starts[n], 1))
        measured: list[Config] = []
        for combo, start in (survivors[n] for n in order):
            measured += self._climb(combo, start)
        return self._leaders(measured)

    def _leaders(self, measured: list[Config]) -> list[Config]:
        """Round 1's configurations within its margin of its leader, best first (FINALISTS at
        the least, 1/ETA of what ran at the most)."""
        ran = {c: self.value(c, 1) for c in measured if self.figures.get((c, 1)) is not None}
        most = max(FINALISTS, math.ceil(len(ran) / ETA))
        return _kept(ran, 1, FINALISTS, most)

    def final_round(self, finalists: list[Config]) -> None:
        """Round 2: the first FINALISTS finalists always, more while the round has room."""
        self.begin(2, [c.combo for c in finalists], [])
        for n, config in enumerate(finalists):
            if n < FINALISTS or self.room(2, config):
                self.measure(config, 2)

    def _climb(self, combo: Combo, start: int) -> list[Config]:
        """Measure `combo` in round 1 at batch index `start`, then each side nearest first, while
        the round has room and within PATIENCE steps of that side's best; what it measured."""
        batches = self.space.batch_sizes
        done: list[int] = []

        def at(i: int) -> float:
            config = self.space.config(combo, batches[i])
            if (config, 0) in self.figures and self.figures[(config, 0)] is None:
                return -math.inf  # it could not run in round 0: not tried again
            if i not in done and self.room(1, config):
                self.measure(config, 1)
                done.append(i)
            return self.value(config, 1)

        at(start)
        noise = MARGIN / math.sqrt(round_scale(1))  # what the round cannot tell apart
        for step in (1, -1):  # up first: where a batch the screen read low has its best
            best = alive = start
            here = start + step
            # on a plateau or a bump a step can lose by noise alone: go PATIENCE steps past
            # the last reading that was not clearly below the one before it (issue 42: a climb
            # stopped at B=16 on one noisy reading where throughput rose to B=65,536)
            while 0 <= here < len(batches) and abs(here - alive) <= PATIENCE:
                figure = at(here)
                if figure == -math.inf:
                    break  # it cannot run here (or the round has no room): nor further out
                if figure > at(best):
                    best = here
                if figure >= at(here - step) * (1 - noise):
                    alive = here  # within the noise of the one before: not a fall
                here += step
        return [self.space.config(combo, batches[i]) for i in done]

    def settle(self) -> None:
        """Each trial's outcome, and the best configuration at the deepest round reached."""
        later = {(t.config, r) for t in self.out.trials for r in range(t.round)}
        for t in self.out.trials:
            if t.outcome == "cut":
                continue
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
        ran = [t for t in self.out.trials if t.samples_per_s is not None and t.outcome != "cut"]
        if not ran:
            return
        deepest = max(t.round for t in ran)
        top = max((t for t in ran if t.round == deepest), key=lambda t: t.samples_per_s or 0.0)
        self.out.best, self.out.best_samples_per_s = top.config, top.samples_per_s


def round_scale(rnd: int) -> float:
    """The share of a sweep's measuring time a round takes: 1/ETA^2, 1/ETA, 1 for rounds 0-2."""
    return float(ETA ** (rnd - (ROUNDS - 1)))


def _kept(figures: dict[Any, float], rnd: int, fewest: int, most: int) -> list[Any]:
    """The keys of `figures` (round `rnd`'s) within the round's margin of the best, best first:
    `fewest` at the least, `most` at the most."""
    ranked = sorted(figures, key=lambda k: -figures[k])
    if not ranked:
        return []
    floor = figures[ranked[0]] * (1 - MARGIN / math.sqrt(round_scale(rnd)))
    within = sum(figures[k] >= floor for k in ranked)
    return ranked[: max(fewest, min(within, most))]
