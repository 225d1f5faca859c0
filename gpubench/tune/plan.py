"""tune's plan: what a trial really costs, learnt as the search goes, and how long each round
may take, so that every round the search plans fits what is left of the budget with the
confirmation's share kept.

A trial's wall-clock cost splits in two: *fixed*, what does not scale with the round's
measuring time (handing the point to a worker, building the model, the first step and its
torch.compile, the profile), and *measuring* (the warm-up after the first step and the measured
windows), which scales with the round. Compile is charged once per combo: a combo's later
trials are planned at its first trial's fixed cost less its compile seconds until a later trial
of it shows what it really costs. Before a combo has run, its fixed cost is the median of the
first trials of combos with the same compile mode (any combo where none; `prior_fixed_s`, the
max-batch probes' cost, before anything ran).

At the start of each round the planner picks one `scale` (MIN_SCALE to 1) of the rounds'
default measuring times, the largest under which the planned trials of this round and of the
rounds after it fit the search's time left, and gives the round its share of that time in
proportion to its planned cost; the search measures in the round while its share has room
(`room`). Everything here is a pure function of the costs it was told (`observe`) and the
clock it was given, so it is tested on synthetic costs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gpubench.tune.search import ETA, FINALISTS, Combo, Space

# A round's measuring time is never cut below this share of its default: shorter, its figures
# are too noisy to rank by (round 0's default is already 1/ETA^2 of a sweep's).
MIN_SCALE = 1 / ETA


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
    The confirmation's reserve after a search of S seconds is `confirm_share` x S plus the fixed
    cost of building its FINALISTS candidates (run.confirm counts that set-up outside its share):
    each at the median first trial's fixed cost less its compile, and the longest compile seen
    once (a worker reuses what it compiled).
    `own_fixed_s`: tune's own fixed costs (start-up, max-batch, environment capture) when the
    search began, the yard stick of measuring everything."""

    budget_s: float | None
    now: Callable[[], float]
    measuring_s: Sequence[float]
    confirm_share: float = 0.0
    own_fixed_s: float = 0.0
    prior_fixed_s: float = 0.0
    costs: list[TrialCost] = field(default_factory=list)
    rounds: list[RoundPlan] = field(default_factory=list)
    measure_all_why: str | None = None
    # the round under way: (round, its planned trials' combos, later rounds' trial counts)
    _round: tuple[int, list[Combo], list[int]] = (0, [], [])
    _done: int = 0  # trials of it ended
    _blind: bool = False  # it began with no cost known

    # --- what trials cost -------------------------------------------------------------------
    def observe(self, cost: TrialCost) -> None:
        """A trial's cost, once it ended (a round begun with nothing known is planned again)."""
        self.costs.append(cost)
        if self.rounds and cost.round == self.rounds[-1].round:
            self._done += 1
            if self._blind:
                self._blind = False
                self._plan()

    def fixed_s(self, combo: Combo, first: bool | None = None) -> float:
        """The fixed seconds of a trial of `combo`: its first (compile included), or a later
        one's (compile charged once: the first's less its compile until a later one ran);
        `first` None: its first where it has not run."""
        mine = [c for c in self.costs if c.combo == combo]
        if first is None:
            first = not mine
        if not first and mine:
            again = mine[1:]
            if again:
                return statistics.median(c.fixed_s for c in again)
            return max(mine[0].fixed_s - mine[0].compile_s, 0.0)
        firsts = self._firsts()
        mode = dict(combo).get("compile")
        alike = [c for c in firsts if dict(c.combo).get("compile") == mode] or firsts
        if not alike:
            return self.prior_fixed_s
        compile_s = 0.0 if first else statistics.median(c.compile_s for c in alike)
        return max(statistics.median(c.fixed_s for c in alike) - compile_s, 0.0)

    def _firsts(self) -> list[TrialCost]:
        seen: set[Combo] = set()
        out = []
        for c in self.costs:
            if c.combo not in seen:
                seen.add(c.combo)
                out.append(c)
        return out

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

    def cost_s(self, rnd: int, combos: Sequence[Combo], scale: float) -> float:
        """What measuring `combos` (in order) in round `rnd` at `scale` is planned to cost."""
        seen = {c.combo for c in self.costs}
        total = 0.0
        for combo in combos:
            total += self.fixed_s(combo, first=combo not in seen) + self.measuring_est_s(rnd, scale)
            seen.add(combo)
        return total

    def _later_s(
        self, rnd: int, later: Sequence[int], combos: Sequence[Combo], scale: float
    ) -> float:
        """The planned cost of `later[k]` trials in round rnd + 1 + k, at a repeated trial's fixed
        cost of the typical combo of `combos`."""
        fixed = statistics.median(self.fixed_s(c, first=False) for c in combos) if combos else 0.0
        return sum(
            n * (fixed + self.measuring_est_s(rnd + 1 + k, scale)) for k, n in enumerate(later)
        )

    # --- the search's deadline --------------------------------------------------------------
    def reserve_s(self, search_s: float) -> float:
        """Seconds the confirmation is planned to take after a search of `search_s` seconds."""
        firsts = self._firsts()
        if not firsts:  # one worker's start-up, as max-batch's probes took it
            return self.confirm_share * search_s + self.prior_fixed_s
        build = statistics.median(c.fixed_s - c.compile_s for c in firsts)
        compile_s = max(c.compile_s for c in firsts)
        return self.confirm_share * search_s + FINALISTS * build + compile_s

    def left_s(self) -> float | None:
        """Seconds the search has left before the confirmation's reserve (None: no budget)."""
        if self.budget_s is None:
            return None
        now = self.now()
        return self.budget_s - now - self.reserve_s(max(now - self.own_fixed_s, 0.0))

    def _spendable_s(self) -> float | None:
        """Seconds of trials the search can still run: each second spent adds confirm_share
        of a second to the confirmation's reserve."""
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
            f"measuring all {space.size} configurations ({all_s:.0f} s planned) costs no more "
            f"than the halving's first rounds ({halving_s:.0f} s) or tune's own fixed costs "
            f"({own_s:.0f} s)"
        )
        return True

    def begin(self, rnd: int, trials: list[Combo], later: list[int]) -> None:
        """Round `rnd` begins: choose the measuring scale and the round's share."""
        self._round = (rnd, list(trials), list(later))
        self._done = 0
        self._blind = not self.costs  # nothing known yet: planned again after its first trial
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
        # the later rounds' fewest trials are kept for them: the start of each combo that
        # would survive what this round has screened (with this one), and the finalists
        screened = {c.combo for c in self.costs if c.round == rnd_now} | {combo}
        survivors = min(len(screened), math.ceil(len(set(trials)) / ETA))
        fewest = [survivors] * (len(later) - 1) + [FINALISTS] * bool(later)
        # steps too slow for the limit: this configuration's floor, else another combo's at
        # the same batch (a step's time is the batch's more than the setting's)
        over = [c for c in self.costs if c.batch_size == batch_size and c.measuring_s > c.limit_s]
        mine = [c.measuring_s for c in over if c.combo == combo]
        floor = max(mine) if mine else statistics.median([c.measuring_s for c in over] or [0.0])
        need = max(self.cost_s(rnd, [combo], scale), self.fixed_s(combo) + floor)
        keep = self._later_s(rnd_now, fewest, trials, scale)
        return need <= self._share_left(left) and need + keep <= left

    def scale(self) -> float:
        """The measuring scale of the round under way (1 before the first)."""
        return self.rounds[-1].scale if self.rounds else 1.0

    def to_dict(self) -> dict[str, Any]:
        """The plan as tune.json's `plan` (see gpubench.tune.trajectory)."""
        return {
            "measure_all": self.measure_all_why is not None,
            "measure_all_why": self.measure_all_why,
            "own_fixed_s": self.own_fixed_s,
            "rounds": [asdict(r) for r in self.rounds],
        }
