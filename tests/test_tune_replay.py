"""The plan replayed on what trials really cost: the per-trial costs of the published CPU tunes
(results/20261124-cpu-tune-vs-grid-v3, tune given 25% of the grid's time; trimmed copies in
tests/data/tune/v3-costs/) drive a fake trial runner on a simulated clock. There cnn and
transformer stopped in round 2 of 3 (compiles of 11-25 s the plan did not foresee, a reserve
of 44 s for a confirmation that took 9 s); replayed, every round completes inside the budget,
the recorded confirmation included, with an overrun of at most one trial's warm-up."""

from __future__ import annotations

import bisect
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpubench.config.spec import Budget
from gpubench.tune import trial
from gpubench.tune.plan import Planner, TrialCost
from gpubench.tune.reserve import Candidate, confirmation_s
from gpubench.tune.search import ROUNDS, Combo, Config, Cut, Space, Stop, search

DATA = Path(__file__).parent / "data" / "tune" / "v3-costs"
SWEEP = Budget()  # what the published tunes measured a point with (their request's budget)
SHARE = 0.15  # run.confirm.SHARE, as the tuner passes it


def combo_of(d: dict[str, Any]) -> Combo:
    return tuple((k, d[k]) for k in ("precision", "compile", "threads"))


@dataclass
class Recorded:
    """What the published tune measured: each configuration's figure, each combo's compile
    seconds, the fixed cost of an eager trial, the cached compile of a repeated one."""

    data: dict[str, Any]
    sps: dict[tuple[Combo, int], float] = field(default_factory=dict)
    compile_s: dict[Combo, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for t in self.data["trials"]:
            key = (combo_of(t), t["batch_size"])
            self.sps[key] = t["samples_per_s"]
            if t["compile"] == "compile":
                self.compile_s.setdefault(key[0], t["compile_s"])
        eager = [t["fixed_s"] for t in self.data["trials"] if t["compile"] == "eager"]
        self.eager_fixed_s = statistics.median(eager)
        self.cached_compile_s = min(t["compile_s"] for t in self.data["trials"] if t["compile_s"])
        self.base = combo_of(self.data["combos"][0])

    def samples_per_s(self, combo: Combo, b: int) -> float:
        """The recorded figure, else the base's batch curve (log-log between its recorded
        batches) times the combo's recorded ratio to the base at a batch both ran."""
        if (combo, b) in self.sps:
            return self.sps[(combo, b)]
        base = sorted((bb, s) for (c, bb), s in self.sps.items() if c == self.base)
        xs = [math.log(bb) for bb, _ in base]
        i = min(max(bisect.bisect_left(xs, math.log(b)), 1), len(xs) - 1)
        f = (math.log(b) - xs[i - 1]) / (xs[i] - xs[i - 1])
        curve = math.exp((1 - f) * math.log(base[i - 1][1]) + f * math.log(base[i][1]))
        ratios = [s / self.sps[(self.base, bb)] for (c, bb), s in self.sps.items()
                  if c == combo and (self.base, bb) in self.sps]  # fmt: skip
        return curve * (statistics.median(ratios) if ratios else 1.0)


@dataclass
class Replay:
    """A tune on a simulated clock whose trials cost what the published ones did: a trial's
    fixed cost is an eager trial's, plus its combo's compile on a batch it has not compiled
    (the cached compile on one it has); it warms up and measures to its budget's limits or
    the fewest steps the harness runs (3 warm-up, 6 measured), and stops at the first step
    boundary past its deadline, as harness.timing does."""

    rec: Recorded
    clock: float = 0.0
    compiled: set[tuple[Combo, int]] = field(default_factory=set)
    overrun_s: list[float] = field(default_factory=list)
    warmup_s: list[float] = field(default_factory=list)
    planner: Planner = field(init=False)

    def __post_init__(self) -> None:
        self.clock = self.rec.data["own_fixed_s"]
        limits = [trial.measuring_limit_s(trial.round_budget(SWEEP, r)) for r in range(ROUNDS)]
        eager = self.rec.eager_fixed_s
        self.planner = Planner(
            self.rec.data["budget_s"], lambda: self.clock, limits, SHARE, self.clock, eager
        )

    def measure(self, config: Config, rnd: int) -> float | None:
        p, combo, b = self.planner, config.combo, config.batch_size
        budget = trial.round_budget(SWEEP, rnd, p.scale())
        left = p.left_s()
        assert left is not None
        if left - p.fixed_s(combo, b) <= 0:
            raise Stop
        budget, cut = trial.bounded(budget, left - p.fixed_s(combo, b))
        deadline, start = self.clock + left, self.clock
        compile_s = 0.0
        if dict(combo)["compile"] == "compile":
            fresh = (combo, b) not in self.compiled
            compile_s = self.rec.compile_s[combo] if fresh else self.rec.cached_compile_s
            self.compiled.add((combo, b))
        fixed = self.rec.eager_fixed_s + compile_s
        sps = self.rec.samples_per_s(combo, b)
        step = b / sps
        measuring = max(trial.measuring_limit_s(budget), (SWEEP.warmup_steps + 6) * step)
        if start + fixed + measuring > deadline:  # the harness stops at the next boundary
            steps = max(1, math.ceil((deadline - start - fixed) / step))
            measuring, cut = min(measuring, steps * step), True
        self.clock = start + fixed + measuring
        self.overrun_s.append(self.clock - deadline)
        warm = math.inf  # it warms up to its limit, unsteady: the confirmation's limit rules
        self.warmup_s.append(SWEEP.warmup_steps * step)
        p.observe(
            TrialCost(combo, rnd, fixed, measuring, compile_s, p.scale(),
                      trial.measuring_limit_s(budget), b, step_time_s=step,
                      samples_per_s=sps, warmup_s=warm,
                      point_s=fixed + measuring)
        )  # fmt: skip
        if cut:
            raise Cut(sps)
        return sps


@pytest.mark.parametrize("model", ["cnn", "transformer"])
def test_replayed_on_published_costs_every_round_completes_inside_the_budget(model: str) -> None:
    rec = Recorded(json.loads((DATA / f"{model}.json").read_text(encoding="utf-8")))
    space = Space(tuple(combo_of(c) for c in rec.data["combos"]), tuple(rec.data["batch_sizes"]))
    replay = Replay(rec)
    out = search(space, replay.measure, pacer=replay.planner)
    assert out.rounds_decided == ROUNDS and out.stopped_in_round is None
    assert [r.round for r in replay.planner.rounds] == [0, 1, 2]
    assert not [t for t in out.trials if t.outcome == "cut"]
    # the confirmation of the replay's own leaders, each set up as the published one's were
    conf = rec.data["confirmation"]
    setup = conf["setup_s"] / len(conf["candidate_step_s"])
    leaders = [Candidate(c.step_s, 0.0, setup) for c in replay.planner.candidates()]
    points = {(c.combo, c.batch_size): c.point_s for c in replay.planner.costs}
    end = replay.clock + confirmation_s(leaders, sum(points.values()))
    budget = rec.data["budget_s"]
    assert end <= budget + replay.warmup_s[-1]
    # a trial never ran past the search's deadline by more than its own warm-up
    assert all(o <= w for o, w in zip(replay.overrun_s, replay.warmup_s, strict=True))
    # and the budget was used, not left idle behind a generous reserve (the published tunes
    # ended 45 s and 8 s early, in round 2 of 3)
    assert end >= 0.9 * budget


@pytest.mark.parametrize("model", ["cnn", "transformer"])
def test_the_confirmation_model_gives_the_published_confirmations_seconds(model: str) -> None:
    # its candidates' measured step times and set-up, and the points' seconds, as published:
    # the interleaved rounds they buy, counted as run.confirm and harness.interleave count them
    conf = json.loads((DATA / f"{model}.json").read_text(encoding="utf-8"))["confirmation"]
    steps = conf["candidate_step_s"]
    candidates = [Candidate(s, 0.0, conf["setup_s"] / len(steps)) for s in steps]
    assert confirmation_s(candidates, conf["point_s"]) == pytest.approx(conf["seconds"], rel=0.1)
