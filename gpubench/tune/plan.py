"""tune's plan: what a trial really costs, learnt as the search goes, and how long each round
may take, so that every round the search plans fits what is left of the budget with the
confirmation's share kept.

A trial's wall-clock cost splits in two: *fixed*, what does not scale with the round's
measuring time (handing the point to a worker, building the model, the first step and its
torch.compile, the profile), and *measuring* (the warm-up after the first step and the measured
windows), which scales with the round. A configuration measured again pays no compile (the
worker's cache holds its graph); a new batch of a compiled combo compiles afresh (a static
graph per shape), so it is planned at the largest first trial of its combo, and a combo not yet
measured at the largest first trial of a setting with its compile mode (any setting's where none
ran; `prior_fixed_s`, the max-batch probes' cost, before anything ran).

At the start of each round, and after each of its trials on the time actually left, the
planner picks one `scale` (MIN_SCALE to 1) of the rounds' default measuring times, the largest
under which the planned trials of this round and the rounds after it fit the time left, and
gives the round its share in proportion to its planned cost; the search measures in the round
while its share has room (`room`), so a round short of time measures shorter and fewer trials
rather than being abandoned. The climbs (round 1) may spend all but what the finalists need; the
later rounds' fewest trials and the confirmation's reserve, both from measured costs, are always
kept. A trial's measuring is planned at no less than the fewest steps the harness runs at its
combo's step time. A trial that started a worker prices no other (its start is paid once).
Everything here is a pure function of the costs it was told (`observe`) and its clock, so it is
tested on synthetic costs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gpubench.harness.interleave import WARMUP_SHARE
from gpubench.run import confirm
from gpubench.science import leaders
from gpubench.store.wording import seconds
from gpubench.tune.search import CLIMB_TRIALS, ETA, FINALISTS, ROUNDS, Combo, Config, Space

# A round's measuring time is never cut below this share of its default: shorter, its figures
# are too noisy to rank by (round 0's default is already 1/ETA^2 of a sweep's).
MIN_SCALE = 1 / ETA


# What the confirmation (run.confirm over harness.interleave) will take after a search, from
# what the search measured: its likely candidates' step times, warm-ups and set-up (a repeated
# trial's fixed cost: a worker, the build, a first step whose compile the cache holds), and the
# rounds its budget buys, counted as run.confirm and harness.interleave count them.


@dataclass(frozen=True)
class Candidate:
    """One configuration the confirmation is expected to re-measure: its median step time, its
    warm-up (seconds after the first step, as its trial measured it; inf where its trial's
    limit ended it unsteady: the confirmation's own limit ends it) and its set-up (the fixed
    cost of measuring it again)."""

    step_s: float
    warmup_s: float
    setup_s: float


def confirmation_s(candidates: Sequence[Candidate], point_s: float) -> float:
    """Seconds the confirmation of `candidates` takes after points that took `point_s` seconds
    in all: the set-up (each candidate's, its warm-up up to interleave's share of the budget)
    and the interleaved rounds, as many as the budget (run.confirm.SHARE of `point_s`) buys,
    at least leaders.MIN_ROUNDS of one-step windows, at most confirm.MAX_ROUNDS, none begun
    after confirm.DEADLINE times the budget. 0 with fewer than two candidates (not needed)."""
    if len(candidates) < 2:
        return 0.0
    k = len(candidates)
    budget = max(confirm.SHARE * point_s, confirm.MIN_BUDGET_S)
    warm = sum(min(c.warmup_s, WARMUP_SHARE * budget / k) for c in candidates)
    setup = sum(c.setup_s for c in candidates) + warm
    switch = sum(c.step_s for c in candidates)  # each window's untimed first step
    fit = int(budget / (confirm.WINDOW_S * k + switch)) if switch > 0 else confirm.MAX_ROUNDS
    rounds = min(max(fit, leaders.MIN_ROUNDS), confirm.MAX_ROUNDS)
    window = confirm.WINDOW_S
    if fit < leaders.MIN_ROUNDS:
        window = max(budget / leaders.MIN_ROUNDS - switch, 0.0) / k
    per_round = sum(max(window, c.step_s) for c in candidates) + switch
    # no round starts after DEADLINE x the budget: at most one round past it
    return setup + min(rounds * per_round, confirm.DEADLINE * budget + per_round)


@dataclass(frozen=True)
class TrialCost:
    """What one trial cost, in wall-clock seconds: `fixed_s` (all but the measuring, the
    compile included), `measuring_s` (warm-up after the first step, measured windows) under
    the measuring `scale` it ran at in `round` and the limit `limit_s` that gave it (warm-up
    and measuring; inf: a step count), and `compile_s`, torch.compile's one-off seconds
    inside fixed_s (0: eager)."""

    combo: Combo
    round: int
    fixed_s: float
    measuring_s: float
    compile_s: float = 0.0
    scale: float = 1.0
    limit_s: float = float("inf")
    batch_size: int = 0  # the configuration's batch (0: not told)
    # what the confirmation will weigh (confirmation_s): the row's median step time,
    # samples/s (None: no figure), warm-up after the compile, and the point's own seconds
    step_time_s: float = 0.0
    samples_per_s: float | None = None
    warmup_s: float = 0.0
    point_s: float = 0.0
    ci_rel: float | None = None  # the row's step_time_ci_rel (None: no interval)
    # it started a worker: its fixed_s holds a one-off start (an H100's: 4 s against 0.5 s)
    fresh_worker: bool = False


@dataclass
class RoundPlan:
    """One round as planned when it began: the trials planned, the measuring `scale`, its
    share of the time left (seconds; None: no budget) and when it began (the search's clock)."""

    round: int
    planned_trials: int
    scale: float
    share_s: float | None
    began_s: float


@dataclass
class Planner:
    """Paces tune's search (search.Pacer) to `budget_s` seconds on the clock `now` (seconds
    since the tune began). `measuring_s[r]`: round r's default measuring seconds per trial (an
    upper bound: warm-up and measuring limits), until trials show what it takes.
    The confirmation's reserve is what it is planned to take (`reserve_s`, from its likely
    candidates' measured costs, confirmation_s); `confirm_share` is its budget's share of
    the points' seconds (run.confirm.SHARE).
    `own_fixed_s`: tune's own fixed costs (start-up, max-batch, environment capture) when the
    search began, the yard stick of measuring everything. `fewest_steps`: the steps a trial
    runs after its first whatever its limits (harness.timing.fewest_steps; 0: not told)."""

    budget_s: float | None
    now: Callable[[], float]
    measuring_s: Sequence[float]
    confirm_share: float = 0.0
    own_fixed_s: float = 0.0
    prior_fixed_s: float = 0.0
    fewest_steps: int = 0
    costs: list[TrialCost] = field(default_factory=list)
    rounds: list[RoundPlan] = field(default_factory=list)
    measure_all_why: str | None = None
    abandoned_why: str | None = None  # why measuring the whole space was dropped midway
    # the round under way: (round, its planned trials' combos, later rounds' trial counts)
    _round: tuple[int, list[Combo], list[int]] = (0, [], [])
    _done: int = 0  # trials of it ended

    # --- what trials cost -------------------------------------------------------------------
    def observe(self, cost: TrialCost) -> None:
        """A trial's cost, once it ended: the round under way is planned again."""
        self.costs.append(cost)
        if self.rounds and cost.round == self.rounds[-1].round:
            self._done += 1
            self._plan()  # on the time actually left and what this trial showed

    def fixed_s(self, combo: Combo, batch_size: int = 0, first: bool | None = None) -> float:
        """The fixed seconds of a trial of `combo` at `batch_size` (0: any batch). Measured
        again, a configuration costs what its repeats cost, else its first trial less its
        compile plus the cached compile its repeats show (a worker finds its graph cached);
        `first` (None: where it has not run), it costs a first trial: torch.compile compiles
        each batch afresh (a static graph per shape), so a new batch of a compiled combo pays
        the combo's largest first trial again; a combo not yet measured, the largest first
        trial of a setting with its compile mode; before anything of that mode ran, the
        largest first trial seen, or `prior_fixed_s` (max-batch's probes); a `fresh_worker`
        trial only where no other ran."""
        mine = [c for c in self.costs if c.combo == combo and batch_size in (0, c.batch_size)]
        if first is None:
            first = not mine
        firsts = self._firsts()
        warm = [c for c in firsts if not c.fresh_worker]
        if not first and mine:
            again = mine[1:]
            if again:
                return statistics.median(c.fixed_s for c in again)
            base = [mine[0]] if not mine[0].fresh_worker or not warm else warm
            uncompiled = statistics.median(c.fixed_s - c.compile_s for c in base)
            return max(uncompiled, 0.0) + self._cached_compile_s()
        pool = warm or firsts  # a worker's start is paid once, not by each new setting
        own = [c.fixed_s for c in pool if c.combo == combo]
        mode = dict(combo).get("compile")
        alike = [c.fixed_s for c in pool if dict(c.combo).get("compile") == mode]
        alike = alike or [c.fixed_s for c in firsts if dict(c.combo).get("compile") == mode]
        seen = own or alike or [c.fixed_s for c in pool]
        return max(seen) if seen else self.prior_fixed_s

    def _cached_compile_s(self) -> float:
        """The compile seconds of a configuration measured again (its graph cached): the
        median its repeats showed, 0 before any."""
        seen: set[tuple[Combo, int]] = set()
        again = []
        for c in self.costs:
            key = (c.combo, c.batch_size)
            if key in seen and c.compile_s > 0:
                again.append(c.compile_s)
            seen.add(key)
        return statistics.median(again) if again else 0.0

    def _firsts(self) -> list[TrialCost]:
        """The first trial of each configuration (combo and batch)."""
        firsts: dict[tuple[Combo, int], TrialCost] = {}
        for c in self.costs:
            firsts.setdefault((c.combo, c.batch_size), c)
        return list(firsts.values())

    def measuring_est_s(self, rnd: int, scale: float) -> float:
        """Round `rnd`'s measuring seconds per trial at `scale`, from the trials seen: each used
        a share of its limit (warm-up ending steady, an interval tight early), which scales
        with the limit, or ran past it on the fewest steps an interval needs (slow steps),
        which does not; the median of what each says, else the default limit."""
        limit = self.measuring_s[rnd] * scale
        seen = []
        for c in self.costs:
            if not c.limit_s > 0 or c.limit_s == float("inf"):
                seen.append(c.measuring_s)
            elif c.measuring_s > c.limit_s:
                seen.append(max(c.measuring_s, limit))
            else:
                seen.append(c.measuring_s / c.limit_s * limit)
        return statistics.median(seen) if seen else limit

    def _trial_fixed_s(self, rnd: int, combo: Combo, again: bool) -> float:
        """A planned trial's fixed cost in round `rnd`: round 0's are new configurations, the
        last round's are measured again, round 1's start again where round 0 left a combo
        (`again`) and climb to new batches after."""
        repeat = rnd == ROUNDS - 1 or (rnd > 0 and again)
        return self.fixed_s(combo, first=not repeat)

    def cost_s(self, rnd: int, combos: Sequence[Combo], scale: float) -> float:
        """What measuring `combos` (in order) in round `rnd` at `scale` is planned to cost."""
        seen: set[Combo] = set()
        total = 0.0
        for combo in combos:
            fixed = self._trial_fixed_s(rnd, combo, combo not in seen)
            total += fixed + self.measuring_est_s(rnd, scale)
            seen.add(combo)
        return total

    def _later_s(
        self, rnd: int, later: Sequence[int], combos: Sequence[Combo], scale: float
    ) -> float:
        """The planned cost of `later[k]` trials in round rnd + 1 + k, at the fixed cost of the
        typical combo of `combos`: the last round's measured again, round 1's one in
        CLIMB_TRIALS a combo's start (measured again), the others new batches."""
        total = 0.0
        for k, n in enumerate(later):
            r = rnd + 1 + k
            each = [
                self.fixed_s(c, first=False)
                if r == ROUNDS - 1
                else (self.fixed_s(c, first=False) + (CLIMB_TRIALS - 1) * self.fixed_s(c))
                / CLIMB_TRIALS
                for c in combos
            ]
            fixed = statistics.median(each) if each else 0.0
            total += n * (fixed + self.measuring_est_s(r, scale))
        return total

    # --- the search's deadline --------------------------------------------------------------
    def candidates(self, point_s: float | None = None) -> list[Candidate]:
        """The configurations the confirmation is expected to re-measure, chosen as run.confirm
        chooses them from the results file: each configuration's deepest measurement, the leader,
        the runner-up and every other whose interval reaches the leader's widened by
        leaders.DRIFT or whose figure is within the margin (leaders.candidates), as many of
        them as its budget for `point_s` seconds of points affords (leaders.affordable; the
        leader and runner-up where none more fit), each as its trials measured it (the last
        round's alone: a tune at 25% of the cnn grid planned 2, confirmed 4, overran 5.7 s)."""
        deepest: dict[tuple[Combo, int], TrialCost] = {}
        for c in self.costs:
            key = (c.combo, c.batch_size)
            if key not in deepest or c.round >= deepest[key].round:
                deepest[key] = c
        ran = [c for c in deepest.values() if c.samples_per_s is not None and c.step_time_s > 0]
        if not ran:
            return []
        keys = ("samples_per_s", "step_time_s", "step_time_ci_rel", "_cost")
        rows = [
            dict(zip(keys, (c.samples_per_s, c.step_time_s, c.ci_rel, c), strict=True)) for c in ran
        ]
        chosen = leaders.candidates(rows)
        if point_s is not None:
            budget = max(confirm.SHARE * point_s, confirm.MIN_BUDGET_S)
            chosen = leaders.affordable(chosen, budget) or chosen[:2]
        return [
            Candidate(
                r["_cost"].step_time_s,
                r["_cost"].warmup_s,
                self.fixed_s(r["_cost"].combo, r["_cost"].batch_size, first=False),
            )
            for r in chosen[: leaders.MAX_CANDIDATES]
        ]

    def reserve_s(self, more_point_s: float = 0.0) -> float:
        """Seconds the confirmation is planned to take after the points measured so far and
        `more_point_s` seconds of points still to come (confirmation_s), from the
        measured costs of its likely candidates (it runs in the trials' worker: no worker
        starts for it); before two configurations ran, FINALISTS candidates each set up at
        `prior_fixed_s` (max-batch's probes)."""
        deepest: dict[tuple[Combo, int], float] = {}
        for c in self.costs:
            deepest[(c.combo, c.batch_size)] = c.point_s or c.fixed_s + c.measuring_s
        point_s = sum(deepest.values()) + more_point_s
        chosen = self.candidates(point_s)
        if len(chosen) < FINALISTS:
            chosen = [Candidate(0.0, 0.0, self.prior_fixed_s)] * FINALISTS
        return confirmation_s(chosen, point_s)

    def left_s(self) -> float | None:
        """Seconds the search has left before the confirmation's reserve (None: no budget)."""
        if self.budget_s is None:
            return None
        return self.budget_s - self.now() - self.reserve_s()

    def _spendable_s(self) -> float | None:
        """Seconds of trials the search can still run: each second of points adds up to
        confirm_share of a second to the confirmation's budget."""
        left = self.left_s()
        return None if left is None else left / (1 + self.confirm_share)

    # --- search.Pacer -------------------------------------------------------------------------
    def measure_all(self, space: Space, halving: list[int]) -> bool:
        """Measure every configuration in round 0 where that costs no more than the halving's
        rounds 0 and 1, or than tune's own fixed costs (start-up, max-batch, the
        confirmation's reserve), and fits the time left."""
        every = [c for c in space.combos for _ in space.batch_sizes]
        all_s = self.cost_s(0, every, 1.0)
        others = list(space.combos[1:])
        first = [space.combos[0]] * (halving[0] - len(others)) + others  # bracket, screens
        halving_s = self.cost_s(0, first, 1.0) + self._later_s(0, halving[1:2], first, 1.0)
        own_s = self.own_fixed_s + self.reserve_s(all_s)
        left = self._spendable_s()
        if all_s > max(halving_s, own_s) or (left is not None and all_s > left):
            return False
        self.measure_all_why = (
            f"measuring all {space.size} configurations ({seconds(all_s)} planned) costs no more "
            f"than the halving's first rounds ({seconds(halving_s)}) or tune's own fixed costs "
            f"({seconds(own_s)})"
        )
        return True

    def still_measure_all(self, left: Sequence[Config]) -> bool:
        """Whether round 0 still measures every configuration: the ones `left` (not measured)
        fit the time left at what the trials so far showed they cost (each one's fixed cost,
        a compile per new batch of a compiled combo, and its measuring, no less than its
        fewest steps). Where not, the search goes on by the halving from what was measured,
        and measure_all_why says why."""
        if self.measure_all_why is None:
            return False
        if all(c.fresh_worker for c in self.costs):
            return True  # a worker's start is paid once: it prices no other trial
        rest = sum(
            self.fixed_s(c.combo, c.batch_size)
            + max(self.measuring_est_s(0, 1.0), self._floor_s(c.combo, c.batch_size))
            for c in left
        )
        spendable = self._spendable_s()
        if spendable is None or rest <= spendable:
            return True
        self.measure_all_why = None
        self.abandoned_why = (
            f"measuring the whole space was dropped after {len(self.costs)} trials: the "
            f"{len(left)} configurations left would take {seconds(rest)} of the "
            f"{seconds(spendable)} left; the halving went on from what they measured"
        )
        return False

    def begin(self, rnd: int, trials: list[Combo], later: list[int]) -> None:
        """Round `rnd` begins: choose the measuring scale and the round's share."""
        self._round = (rnd, list(trials), list(later))
        self._done = 0
        self.rounds.append(RoundPlan(rnd, len(trials), 1.0, None, self.now()))
        self._plan()

    def _plan(self) -> None:
        """The round under way's scale (the largest, down to MIN_SCALE, under which what is
        left of it and the later rounds fit the time left) and its share of that time."""
        rnd, trials, later = self._round
        plan = self.rounds[-1]
        left = self._spendable_s()
        if left is None:
            return
        for s in (1.0, *(MIN_SCALE + (1 - MIN_SCALE) * k / 8 for k in range(7, -1, -1))):
            plan.scale = s
            if self.cost_s(rnd, trials, s) + self._later_s(rnd, later, trials, s) <= left:
                break
        plan.share_s = self.now() - plan.began_s + self._share_left(left)

    def _share_left(self, left: float) -> float:
        """Seconds of `left` the rest of the round under way may spend: all it plans where the
        later rounds fit beside it, else its part in proportion to the planned costs."""
        rnd, trials, later = self._round
        scale = self.rounds[-1].scale
        if rnd == ROUNDS - 2 and len(later) == 1:
            # the climbs: all but what the finalists need at this scale (measured again).
            # Held to their planned part, a compiled combo's climb (a compile per new batch)
            # stopped short of its best with a third of the budget left unspent.
            return max(left - self._kept_s(rnd, [FINALISTS], trials, scale), 0.0)
        rest = self.cost_s(rnd, trials[self._done :], scale)
        total = rest + self._later_s(rnd, later, trials, scale)
        return max(left, 0.0) * (rest / total if total > 0 else 1.0)

    def room(self, rnd: int, combo: Combo, batch_size: int = 0) -> bool:
        """Whether the next trial of `combo` at `batch_size` fits the round's share of the time
        left (its part in proportion to the planned costs of this round's rest and later
        rounds'), and what an earlier round showed it takes at the least (its steps' floor)."""
        left = self._spendable_s()
        if left is None:
            return True
        rnd_now, trials, later = self._round
        scale = self.rounds[-1].scale
        # the later rounds' fewest trials are kept for them, at their shortest: the start of
        # each combo that would survive what this round has screened (with this one), and the
        # finalists, all measured again
        screened = {c.combo for c in self.costs if c.round == rnd_now} | {combo}
        survivors = min(len(screened), math.ceil(len(set(trials)) / ETA))
        fewest = [survivors] * (len(later) - 1) + [FINALISTS] * bool(later)
        floor = self._floor_s(combo, batch_size)
        need = self.fixed_s(combo, batch_size) + max(self.measuring_est_s(rnd, scale), floor)
        keep = self._kept_s(rnd_now, fewest, trials)
        return need <= self._share_left(left) and need + keep <= left

    def _floor_s(self, combo: Combo, batch_size: int) -> float:
        """The least measuring seconds of a trial of `combo` at `batch_size`, whatever its limit:
        the fewest steps the harness runs (`fewest_steps`, or more where trials that ran past
        their limit showed more) at the step time there, scaled from the nearest measured batch
        (samples/s flat) of the combo, else of any combo (a step's time is the batch's more than
        the setting's); else what trials at that batch that ran past their limit took. 0 where
        nothing says (a CPU's B=1024 priced at B=4's 0.5 s began a tune with a 30 s trial)."""
        over = [c for c in self.costs if c.measuring_s > c.limit_s]
        timed = [c for c in over if c.step_time_s > 0]
        steps = max(
            self.fewest_steps,
            statistics.median(c.measuring_s / c.step_time_s for c in timed) if timed else 0,
        )
        ran = [c for c in self.costs if c.step_time_s > 0 and c.batch_size]
        mine = [c for c in ran if c.combo == combo] or ran
        if steps and mine and batch_size:
            near = min(mine, key=lambda c: abs(math.log(c.batch_size / batch_size)))
            return steps * near.step_time_s * batch_size / near.batch_size
        at_b = [c for c in over if c.batch_size == batch_size]
        own = [c.measuring_s for c in at_b if c.combo == combo]
        return max(own) if own else statistics.median([c.measuring_s for c in at_b] or [0.0])

    def _kept_s(
        self, rnd: int, fewest: Sequence[int], combos: Sequence[Combo], scale: float = MIN_SCALE
    ) -> float:
        """What the later rounds' fewest trials (`fewest[k]` in round rnd + 1 + k) cost at
        `scale` (the least: MIN_SCALE): each a configuration measured again."""
        fixed = statistics.median(self.fixed_s(c, first=False) for c in combos) if combos else 0.0
        return sum(
            n * (fixed + self.measuring_est_s(rnd + 1 + k, scale)) for k, n in enumerate(fewest)
        )

    def scale(self) -> float:
        """The measuring scale of the round under way (1 before the first)."""
        return self.rounds[-1].scale if self.rounds else 1.0

    def to_dict(self) -> dict[str, Any]:
        """The plan as tune.json's `plan` (see gpubench.store.tune_record)."""
        return {
            "measure_all": self.measure_all_why is not None,
            "measure_all_why": self.measure_all_why or self.abandoned_why,
            "own_fixed_s": self.own_fixed_s,
            "rounds": [asdict(r) for r in self.rounds],
        }
