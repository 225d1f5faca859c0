"""The search of time to target on Optuna's machinery, as a pure function of the runs' outcomes
(run_target gives it real runs; the tests give it synthetic learning curves).

The space is small, so each configuration (batch size x learning rate) is enqueued in an Optuna
study, in order, as a trial on an ordered log-scaled batch axis and a categorical lr-scaling rule
(the seeded sampler never has to guess). A trial trains from scratch on seed 0 for up to its
rung's training seconds, stopped at the target; rungs are limits r_0 < r_1 < ... `eta` apart,
run in turn (every trial at a rung before any at the next, so the space is screened first; at
a later rung the least rung value first), and a trial going on trains again from scratch (no
checkpoints are kept). Each run reports its rung_value at step eta^k, and Optuna's
SuccessiveHalvingPruner (asynchronous successive halving, reduction factor eta) lets it go on
where that value is among the best 1/eta reported at the rung so far (the first there go on
where they are the best so far). Before the pruner is heeded,
a trial that reached the target is finished, one that failed is stopped, one not at the target
by SLACK times the best time so far is stopped as hopeless (seeds differ by up to
science.target_time's disagreement spread), and one short of it at the top rung is stopped.
The answer (seed_spread) is the contender, of the CONTENDERS fastest that reached the target,
with the least median time over every seed; each re-run on a further seed is a trial of its own.

The study is the record: each trial carries its runs (user attribute `runs`, SearchResult.runs).
The budget is wall seconds of the runs' own `cost_s`: a search run starts only where its
training limit fits in the budget less the contenders' expected re-runs (their seed-0 cost
each), so the search exceeds it by at most one run's cost beyond its training limit.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import Trial, TrialState

from gpubench.science.curve import HIGHER_IS_BETTER
from gpubench.science.target_time import SPREAD_LIMIT, TargetTime
from gpubench.store.wording import number, seconds, times

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
        return f"B={self.batch_size} lr={number(self.lr)} ({self.lr_scaling})"


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
    """A run asked for: configuration `trial` at `rung` on `seed` for up to `limit_s` training
    seconds; `index` is its place in the trajectory."""

    index: int
    trial: int
    config: TargetConfig
    rung: int
    seed: int
    limit_s: float


# Runs a request and says what it gave.
Train = Callable[[Request], TrialRun]
# Hears of each run once decided: its record (SearchResult.runs).
OnRun = Callable[[dict[str, Any]], None]


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


def rung_value(run: TrialRun, rung_s: float, metric: str, target: float) -> float:
    """What a run reports at its rung for the pruner (the less the better): its training
    seconds to the target; short of it, the rung's limit `rung_s` (which every run that reached
    the target at that rung beat) raised by how far short its best held-out metric fell,
    relative to the target; infinity where it was never evaluated."""
    if run.reached:
        return float(run.time_to_target_s)  # type: ignore[arg-type]
    if run.best_metric is None or not math.isfinite(run.best_metric):
        return math.inf
    short = target - run.best_metric if HIGHER_IS_BETTER[metric] else run.best_metric - target
    return rung_s * (1 + max(short, 0.0) / (abs(target) or 1.0))


@dataclass
class SearchResult:
    """The search over `configs` as its Optuna study records it, the fastest configuration
    (index) with its time to target, and what the runs cost. `seed` seeds the sampler."""

    configs: Sequence[TargetConfig]
    eta: int
    seed: int = 0
    study: optuna.Study = field(init=False)
    best: int | None = None
    best_s: float | None = None
    spent_s: float = 0.0
    stopped_by_budget: bool = False

    def __post_init__(self) -> None:
        # gpubench prints its own line per run: Optuna's per-trial log lines would repeat them
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(
            direction="minimize",
            sampler=optuna.samplers.TPESampler(seed=self.seed),
            pruner=optuna.pruners.SuccessiveHalvingPruner(
                min_resource=1, reduction_factor=self.eta
            ),
        )
        sizes = [c.batch_size for c in self.configs]
        rules = list(dict.fromkeys(c.lr_scaling for c in self.configs))
        self._axes = {
            "batch_size": IntDistribution(min(sizes), max(sizes), log=True),
            "lr_scaling": CategoricalDistribution(rules),
        }

    def runs(self) -> list[dict[str, Any]]:
        """Every run in the order it ran, as the study's trials record them: the trials of
        tune_target.json (target._write_record)."""
        trials = self.study.get_trials(deepcopy=False)
        return sorted((r for t in trials for r in t.user_attrs["runs"]), key=lambda r: r["run"])

    def trials_measured(self) -> int:
        """The configurations the search ran (the space it covered)."""
        return len({r["id"] for r in self.runs() if r["decision"] != "seed"})

    def contenders(self) -> list[dict[str, Any]]:
        """The seed-0 runs that reached the target, fastest first: one per configuration, at
        most CONTENDERS."""
        reached = [r for r in self.runs() if r["decision"] == "reached"]
        first: dict[int, dict[str, Any]] = {}
        for r in sorted(reached, key=lambda r: float(r["time_to_target_s"])):
            first.setdefault(r["id"], r)
        return list(first.values())[:CONTENDERS]

    def ask(self, i: int, seed: int) -> Trial:
        """A new trial of configuration `i` on `seed`, enqueued so the sampler takes it as is."""
        c = self.configs[i]
        params = {"batch_size": c.batch_size, "lr_scaling": c.lr_scaling}
        self.study.enqueue_trial(params, user_attrs={"config": i, "seed": seed, "runs": []})
        return self.study.ask(self._axes)

    def run(
        self, train: Train, trial: Trial, rung: int, limit_s: float, metric: str
    ) -> tuple[TrialRun, dict[str, Any]]:
        """Run `trial`'s configuration at `rung` for up to `limit_s` training seconds through
        `train`, add its cost to what the search spent; the run and its record, to `note`."""
        i, seed = trial.user_attrs["config"], trial.user_attrs["seed"]
        index = len(self.runs())
        run = train(Request(index, i, self.configs[i], rung, seed, limit_s))
        self.spent_s += run.cost_s
        t = run.time_to_target_s
        if seed == 0 and t is not None and run.reached and (self.best_s is None or t < self.best_s):
            self.best, self.best_s = i, t
        config = self.configs[i]
        return run, {
            "run": index,
            "id": i,
            "config": dataclasses.asdict(config),
            "label": config.label(),
            "rung": rung,
            "seed": seed,
            "limit_s": limit_s,
            "metric": metric,
            **dataclasses.asdict(run),
            "t_start_s": self.spent_s - run.cost_s,
            "t_end_s": self.spent_s,
            "optuna_trial": trial.number,
        }

    def note(
        self, trial: Trial, record: dict[str, Any], decision: str, reason: str, value: float | None
    ) -> dict[str, Any]:
        """Add `record`, decided, to `trial`'s runs in the study; return it."""
        record |= {"decision": decision, "reason": reason, "value": value}
        record["best_so_far_s"] = self.best_s
        trial.set_user_attr("runs", [*trial.user_attrs["runs"], record])
        return record

    def tell(self, trial: Trial, run: TrialRun) -> None:
        """End `trial` by its last run: complete with its time to target where it reached it,
        failed where the run failed, else pruned (stopped short of the target)."""
        if run.reached:
            self.study.tell(trial, run.time_to_target_s)
        else:
            state = TrialState.FAIL if run.status != "ok" else TrialState.PRUNED
            self.study.tell(trial, state=state)

    def out_of_budget(self, trial: Trial) -> None:
        """End `trial`, kept for a rung its run does not fit in the budget: pruned, its last
        run's decision amended."""
        runs = trial.user_attrs["runs"]
        last = runs[-1] | {"decision": "stopped", "reason": "the budget ran out"}
        trial.set_user_attr("runs", [*runs[:-1], last])
        self.study.tell(trial, state=TrialState.PRUNED)

    def fits(self, limit_s: float, budget_s: float, seeds: int) -> bool:
        """Whether a run of up to `limit_s` training seconds fits in `budget_s` less what is
        spent and the contenders' `seeds` - 1 re-runs (their seed-0 cost each)."""
        reserve = (seeds - 1) * sum(float(c["cost_s"]) for c in self.contenders())
        return self.spent_s + reserve + limit_s <= budget_s


def search(
    result: SearchResult,
    train: Train,
    metric: str,
    target: float,
    rungs: Rungs,
    budget_s: float,
    seeds: int = 1,
    on_run: OnRun | None = None,
) -> SearchResult:
    """Search `result.configs` for the least time to `target` of `metric` (the module
    docstring) through `train`, within `budget_s` (keeping the contenders' `seeds` - 1
    re-runs' cost). `on_run` hears of each run once decided. Returns `result`, grown."""
    if rungs.eta != result.eta:
        raise ValueError(f"rungs' eta {rungs.eta} is not the study's reduction factor {result.eta}")
    # (rung value, configuration, its trial once asked): rung 0 in the enqueued order, each later
    # rung the most promising first, as Optuna's asynchronous rule favours who reports first
    alive: list[tuple[float, int, Trial | None]] = [
        (0, i, None) for i in range(len(result.configs))
    ]
    for k, rung_s in enumerate(rungs.limits_s):
        going: list[tuple[float, int, Trial | None]] = []
        for n, (_, i, trial) in enumerate(alive):
            limit = _limit(result, rung_s)
            if not result.fits(limit, budget_s, seeds):
                result.stopped_by_budget = True
                for _, _, kept in going + alive[n:]:
                    if kept is not None:
                        result.out_of_budget(kept)
                return result
            trial = trial or result.ask(i, 0)
            run, record = result.run(train, trial, k, limit, metric)
            value = None if run.status != "ok" else rung_value(run, rung_s, metric, target)
            decision, reason = _decide(trial, run, k, limit, value, rungs, result.best_s)
            noted = result.note(trial, record, decision, reason, value)
            if on_run is not None:
                on_run(noted)
            if decision == "kept" and value is not None:  # kept: it reported a value
                going.append((value, i, trial))
            else:
                result.tell(trial, run)
        alive = sorted(going, key=lambda it: it[0])
    return result


def _limit(result: SearchResult, rung_s: float) -> float:
    """A rung's training limit, cut to SLACK times the best time so far."""
    return rung_s if result.best_s is None else min(rung_s, SLACK * result.best_s)


def _decide(
    trial: Trial,
    run: TrialRun,
    k: int,
    limit_s: float,
    value: float | None,
    rungs: Rungs,
    best_s: float | None,
) -> tuple[str, str]:
    """The decision on `trial`'s run at rung `k` and why: reached, kept or stopped. Every run
    that finished reports `value` at step eta^k, so it counts at its rung for those after it."""
    if value is None:
        return "stopped", f"{run.status}" + (f": {run.error}" if run.error else "")
    trial.report(value, rungs.eta**k)
    pruned = trial.should_prune()
    if run.reached:
        return "reached", f"reached the target in {seconds(run.time_to_target_s)}"
    if best_s is not None and limit_s >= SLACK * best_s:
        return "stopped", (
            f"hopeless: not at the target by {seconds(SLACK * best_s)}, {times(SLACK)} the best "
            "time to target"
        )
    if k == len(rungs.limits_s) - 1:
        return "stopped", f"not at the target within the top rung's {seconds(limit_s)}"
    where = f"the best 1/{rungs.eta} of rung {k}'s values so far (Optuna's successive halving)"
    if pruned:
        return "stopped", f"pruned: not in {where}"
    return "kept", f"in {where}"


def seed_spread(
    result: SearchResult,
    train: Train,
    seeds: int,
    rungs: Rungs,
    on_run: OnRun | None = None,
) -> TargetTime | None:
    """Re-run each contender on every further seed (a trial of its own) for up to the top rung
    (a slower seed is measured, not cut at the best time) and name the answer: the least median
    time to target, those that reached it on every seed first. Sets `result.best` and `best_s`
    (its seed-0 time); its TargetTime, None where no trial reached the target."""
    contenders = result.contenders()
    if not contenders:
        return None
    limit_s = rungs.limits_s[-1]
    spreads: list[tuple[dict[str, Any], TargetTime]] = []
    for first in contenders:
        rows = [_seed_row(first)]
        for seed in range(1, seeds):
            trial = result.ask(first["id"], seed)
            run, record = result.run(train, trial, len(rungs.limits_s), limit_s, first["metric"])
            noted = result.note(trial, record, "seed", f"a contender re-run on seed {seed}", None)
            result.tell(trial, run)
            rows.append(_seed_row(noted))
            if on_run is not None:
                on_run(noted)
        times = sorted(
            float(r["time_to_target_s"]) for r in rows if r["time_to_target_s"] is not None
        )
        spreads.append((first, TargetTime(tuple(rows), tuple(times))))
    first, answer = min(spreads, key=lambda fs: (not fs[1].complete, fs[1].median_s or math.inf))
    result.best, result.best_s = first["id"], first["time_to_target_s"]
    return answer


def _seed_row(run: dict[str, Any]) -> dict[str, Any]:
    reached = run["status"] == "ok" and run["time_to_target_s"] is not None
    return {
        "seed": run["seed"],
        "batch_size": run["config"]["batch_size"],
        "status": run["status"],
        "time_to_target_s": run["time_to_target_s"] if reached else None,
    }
