"""The search of time to target as a pure function of the runs' outcomes: ASHA-style rungs of
training time (run_target gives it real runs; the tests give it synthetic learning curves).

A trial is one configuration (batch size x learning rate) trained from scratch on seed 0 for up
to its rung's training seconds, stopped at the target. Rungs are limits r_0 < r_1 < ... `eta`
apart; a promoted configuration trains again from scratch (no checkpoints are kept). Once every
live trial has run a rung: a trial that reached the target is finished; one that did not within
SLACK times the best time so far is stopped as hopeless (one seed's time is not the
configuration's: seeds differ by up to science.target_time's disagreement spread); of the rest
the top 1/eta (reached first by time, then by the best held-out metric) go on, and at the top
rung every one short of the target is stopped. The answer (seed_spread) is the contender, of the
CONTENDERS fastest that reached the target, with the least median time over every seed.

The budget is wall seconds of the runs' own `cost_s`: no run starts once the cost so far plus the
contenders' expected re-runs reaches it, so it is exceeded by at most the run in flight.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpubench.science.curve import HIGHER_IS_BETTER
from gpubench.science.target_time import SPREAD_LIMIT, TargetTime

# A trial is hopeless once it has not reached the target by this many times the best time so far.
SLACK = SPREAD_LIMIT
# The fastest trials (on seed 0) re-run on every seed before one is named the answer.
CONTENDERS = 3


@dataclass(frozen=True)
class TargetConfig:
    """A batch size and the peak rate `lr` that rule `lr_scaling` gives it from `lr_base`."""

    batch_size: int
    lr_scaling: str
    lr_base: float
    lr: float

    def label(self) -> str:
        return f"B={self.batch_size} lr={self.lr:.3g} ({self.lr_scaling})"

    def as_dict(self) -> dict[str, Any]:
        """batch_size, lr_scaling, lr_base and lr."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TrialRun:
    """One run: its row's status, training seconds, best held-out value of the target metric
    (None: never evaluated), training seconds to the target (None: not met), and `cost_s`, its
    wall seconds with evaluation and process overhead."""

    status: str
    elapsed_s: float
    best_metric: float | None
    time_to_target_s: float | None
    cost_s: float
    error: str | None = None

    @property
    def reached(self) -> bool:
        return self.status == "ok" and self.time_to_target_s is not None


@dataclass(frozen=True)
class Request:
    """A run asked for: `trial` at `rung` on `seed` for up to `limit_s` training seconds;
    `index` is its place in the trajectory."""

    index: int
    trial: int
    config: TargetConfig
    rung: int
    seed: int
    limit_s: float


# Runs a request and says what it gave.
Train = Callable[[Request], TrialRun]


@dataclass(frozen=True)
class Rungs:
    """The rungs' training-time limits (s, ascending), `eta` apart; 1/eta of a rung goes on."""

    limits_s: tuple[float, ...]
    eta: int

    @staticmethod
    def geometric(max_s: float, count: int, eta: int) -> Rungs:
        """`count` rungs, the top one `max_s`, each `eta` times the one below."""
        if count < 1:
            raise ValueError(f"invalid rung count {count}; allowed: 1 or more")
        if eta < 2:
            raise ValueError(f"invalid eta {eta}; allowed: 2 or more")
        if not 0 < max_s < math.inf:
            raise ValueError(f"invalid top rung {max_s!r} s; allowed: a finite number above 0")
        return Rungs(tuple(max_s / eta ** (count - 1 - k) for k in range(count)), eta)


@dataclass
class Step:
    """One run in the trajectory (`rung` len(rungs) for the re-runs on further seeds), between
    `t_start_s` and `t_end_s` of the search's cost; `decision` reached, kept, stopped or seed,
    with `reason`; `best_so_far_s` the best time to target once its rung was decided."""

    trial: int
    config: TargetConfig
    rung: int
    seed: int
    limit_s: float
    run: TrialRun
    t_start_s: float
    t_end_s: float
    decision: str = "pending"
    reason: str = ""
    best_so_far_s: float | None = None

    def as_dict(self, metric: str) -> dict[str, Any]:
        """The step as tune_target.json's trial."""
        return {
            "id": self.trial,
            "config": self.config.as_dict(),
            "label": self.config.label(),
            "rung": self.rung,
            "seed": self.seed,
            "limit_s": self.limit_s,
            "metric": metric,
            **dataclasses.asdict(self.run),
            "decision": self.decision,
            "reason": self.reason,
            "t_start_s": self.t_start_s,
            "t_end_s": self.t_end_s,
            "best_so_far_s": self.best_so_far_s,
        }


@dataclass
class SearchResult:
    """The trajectory, the fastest trial (index) with its time to target, and what it cost."""

    steps: list[Step] = field(default_factory=list)
    best: int | None = None
    best_s: float | None = None
    spent_s: float = 0.0
    stopped_by_budget: bool = False

    def trials_measured(self) -> int:
        """The configurations the search ran (the space it covered)."""
        return len({s.trial for s in self.steps if s.decision != "seed"})

    def run(
        self, train: Train, trial: int, config: TargetConfig, rung: int, seed: int, limit_s: float
    ) -> Step:
        """Run one request through `train` and add it to the trajectory and its cost."""
        run = train(Request(len(self.steps), trial, config, rung, seed, limit_s))
        step = Step(
            trial, config, rung, seed, limit_s, run, self.spent_s, self.spent_s + run.cost_s
        )
        self.spent_s += run.cost_s
        self.steps.append(step)
        return step

    def contenders(self) -> list[Step]:
        """The seed-0 runs that reached the target, fastest first: at most CONTENDERS."""
        reached = [s for s in self.steps if s.run.reached and s.decision != "seed"]
        first: dict[int, Step] = {}
        for s in sorted(reached, key=lambda s: float(s.run.time_to_target_s or 0.0)):
            first.setdefault(s.trial, s)
        return list(first.values())[:CONTENDERS]


def search(
    configs: Sequence[TargetConfig],
    train: Train,
    metric: str,
    rungs: Rungs,
    budget_s: float,
    seeds: int = 1,
    on_step: Callable[[Step], None] | None = None,
    into: SearchResult | None = None,
) -> SearchResult:
    """Search `configs` for the least time to target (the module docstring) through `train`,
    within `budget_s` (keeping the contenders' `seeds` - 1 re-runs' cost). `on_step` hears of
    each step once decided; the trajectory grows in `into` (a new SearchResult by default)."""
    out = into if into is not None else SearchResult()
    alive = list(range(len(configs)))
    for k, rung_s in enumerate(rungs.limits_s):
        ran: list[Step] = []
        for i in alive:
            reserve = (seeds - 1) * sum(c.run.cost_s for c in out.contenders())
            if out.spent_s + reserve >= budget_s:
                out.stopped_by_budget = True
                break
            limit = rung_s if out.best_s is None else min(rung_s, SLACK * out.best_s)
            step = out.run(train, i, configs[i], k, 0, limit)
            ran.append(step)
            run = step.run
            if run.reached and (out.best_s is None or run.time_to_target_s < out.best_s):  # type: ignore[operator]
                out.best, out.best_s = i, run.time_to_target_s
        alive = _decide(ran, metric, rungs, k, out)
        for step in ran:
            step.best_so_far_s = out.best_s
            if on_step is not None:
                on_step(step)
        if out.stopped_by_budget or not alive:
            break
    return out


def _decide(ran: list[Step], metric: str, rungs: Rungs, k: int, out: SearchResult) -> list[int]:
    """Decide every step of rung `k`; return the trials that go on to the next rung."""
    top = k == len(rungs.limits_s) - 1
    ranked: list[Step] = []
    for s in ran:
        r = s.run
        if r.reached:
            s.decision, s.reason = "reached", f"reached the target in {r.time_to_target_s:.3g} s"
            ranked.append(s)
        elif r.status != "ok":
            s.decision, s.reason = "stopped", f"{r.status}" + (f": {r.error}" if r.error else "")
        elif out.best_s is not None and s.limit_s >= SLACK * out.best_s:
            s.decision = "stopped"
            s.reason = (
                f"hopeless: not at the target by {SLACK * out.best_s:.3g} s, {SLACK:g}x the best "
                "time to target"
            )
        else:
            ranked.append(s)
    ranked.sort(key=lambda s: _rank(s.run, metric))
    quota = max(1, len(ranked) // rungs.eta)
    going: list[int] = []
    for place, s in enumerate(ranked):
        if s.run.reached:
            continue
        if top:
            s.decision = "stopped"
            s.reason = f"not at the target within the top rung's {s.limit_s:.3g} s"
        elif place < quota and out.stopped_by_budget:
            s.decision, s.reason = "stopped", "the budget ran out"
        elif place < quota:
            s.decision = "kept"
            s.reason = f"in the top 1/{rungs.eta} of rung {k} by best {metric}"
            going.append(s.trial)
        else:
            s.decision = "stopped"
            s.reason = f"pruned: not in the top 1/{rungs.eta} of rung {k} by best {metric}"
    return going


def _rank(run: TrialRun, metric: str) -> tuple[int, float]:
    """Sort key of a run in its rung: reached first (by time to target), then by the best
    metric (the better first), then never evaluated."""
    if run.reached:
        return (0, float(run.time_to_target_s))  # type: ignore[arg-type]
    if run.best_metric is None or not math.isfinite(run.best_metric):
        return (2, 0.0)
    return (1, -run.best_metric if HIGHER_IS_BETTER[metric] else run.best_metric)


def seed_spread(
    result: SearchResult,
    train: Train,
    seeds: int,
    rungs: Rungs,
    on_step: Callable[[Step], None] | None = None,
) -> TargetTime | None:
    """Re-run each contender on every further seed for up to the top rung (a slower seed is
    measured, not cut at the best time) and name the answer: the least median time to target,
    those that reached it on every seed first. Sets `result.best` and `best_s` (its seed-0
    time); its TargetTime, None where no trial reached the target."""
    contenders = result.contenders()
    if not contenders:
        return None
    limit_s = rungs.limits_s[-1]
    spreads: list[tuple[Step, TargetTime]] = []
    for first in contenders:
        rows = [_seed_row(first)]
        for seed in range(1, seeds):
            step = result.run(train, first.trial, first.config, len(rungs.limits_s), seed, limit_s)
            step.decision, step.reason = "seed", f"a contender re-run on seed {seed}"
            step.best_so_far_s = result.best_s
            rows.append(_seed_row(step))
            if on_step is not None:
                on_step(step)
        times = sorted(
            float(r["time_to_target_s"]) for r in rows if r["time_to_target_s"] is not None
        )
        spreads.append((first, TargetTime(tuple(rows), tuple(times))))
    first, answer = min(spreads, key=lambda fs: (not fs[1].complete, fs[1].median_s or math.inf))
    result.best, result.best_s = first.trial, first.run.time_to_target_s
    return answer


def _seed_row(step: Step) -> dict[str, Any]:
    return {
        "seed": step.seed,
        "batch_size": step.config.batch_size,
        "status": step.run.status,
        "time_to_target_s": step.run.time_to_target_s if step.run.reached else None,
    }
