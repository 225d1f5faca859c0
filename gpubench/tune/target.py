"""`tune --target METRIC=VALUE`: the batch size and learning rate that reach a quality target in
the least training time on a shipped real data set, without paying for the grid.

The space is batch sizes x the rates the lr-scaling rules give each from the base rate (a rate
two rules give alike is one configuration); tune.target_search trains them as a sweep's
convergence points are trained (run.worker), on rungs of training time, in an Optuna study. The
run folder holds the results file (every run, marked with `tune_run`, its place in the trajectory,
and `tune_trial`, its configuration), env.json, results.csv and tune_target.json, rewritten after
every run.

tune_target.json: store.target_record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.config.checks import check_one_of
from gpubench.config.convergence import TARGET_METRICS, Convergence, check, check_models
from gpubench.config.errors import ConfigError
from gpubench.config.model_options import decode, encode
from gpubench.config.registry import SETTINGS
from gpubench.config.spec import OPTIMIZERS, PRECISIONS, Point
from gpubench.config.suite import convergence_settings
from gpubench.data import catalog
from gpubench.harness.optimizers import DEFAULT_LR
from gpubench.run import maxbatch, preflight
from gpubench.run.context import RunContext, RunOptions
from gpubench.run.worker import WorkerRunner
from gpubench.science import lr_scaling
from gpubench.science.curve import HIGHER_IS_BETTER
from gpubench.science.target_time import TargetTime
from gpubench.store.results import ResultStore
from gpubench.store.target_record import OptunaStudy, TargetAnswer, TargetRecord, TargetRun
from gpubench.store.wording import number, seconds
from gpubench.tune.target_search import (
    OnRun,
    Request,
    Rungs,
    SearchResult,
    TargetConfig,
    TrialRun,
    seed_spread,
)
from gpubench.tune.target_search import search as search_rungs

RUN_OPTIONS = RunOptions()  # the sweep's: no memory cap, its point timeout
ETA = 3  # each rung eta times the last; the top 1/eta go on (the eta of Li et al.'s Hyperband)
RUNG_COUNT = 3

# what tune_target.json takes as it is from the runs' Point
_OF_POINT = ("model", "device", "precision", "optimizer", "seed", "data")


def _write_record(
    store: ResultStore,
    fixed: TargetRecord,
    result: SearchResult,
    elapsed_s: float,
    spread: TargetTime | None = None,
    finished: bool = False,
) -> None:
    """Write tune_target.json whole (durably) as the search stands: `fixed` (what the search
    was given) with `result`'s trajectory, answer and study."""
    answer = None
    if result.best is not None:
        best = result.configs[result.best]
        describe = spread.describe() if spread else None
        time_to_target = spread.as_dict() if spread else None
        answer = TargetAnswer(dataclasses.asdict(best), best.label(), time_to_target, describe)
    study = result.study
    dataclasses.replace(
        fixed,
        elapsed_s=elapsed_s,
        spent_s=result.spent_s,
        covered={"measured": result.trials_measured(), "space_size": len(result.configs)},
        stopped_by_budget=result.stopped_by_budget,
        finished=finished,
        trials=tuple(TargetRun(**r) for r in result.runs()),
        best_so_far_s=result.best_s,
        answer=answer,
        optuna=OptunaStudy(
            type(study.sampler).__name__,
            type(study.pruner).__name__,
            result.eta,
            dict(Counter(t.state.name for t in study.trials)),
        ),
    ).write(store.dir)


@dataclass(frozen=True)
class TargetResult:
    """A finished target search: the answer and its time to target over seeds (None: none
    reached the target within the budget), its cost (wall seconds), coverage and folder."""

    out: Path
    metric: str
    target: float
    best: TargetConfig | None
    time_to_target: TargetTime | None
    elapsed_s: float
    measured: int
    space_size: int
    stopped_by_budget: bool

    def describe(self) -> str:
        """One line: the answer with its spread (or that there is none), cost and coverage."""
        covered = f"{self.measured} of {self.space_size} configurations measured"
        ended = ", the budget ran out" if self.stopped_by_budget else ""
        cost = f"search {seconds(self.elapsed_s)}{ended}; {covered}"
        if self.best is None or self.time_to_target is None:
            return f"no configuration reached {self.metric} {number(self.target)} ({cost})"
        return (
            f"{self.best.label()} reaches {self.metric} {number(self.target)} in "
            f"{self.time_to_target.describe()} of training ({cost})"
        )


def parse_target(text: str) -> tuple[str, float]:
    """`METRIC=VALUE` (e.g. eval_accuracy=0.9) as (metric, value); ConfigError otherwise."""
    metric, sep, value = text.partition("=")
    allowed = f"METRIC=VALUE with METRIC one of {', '.join(TARGET_METRICS)}"
    if not sep:
        raise ConfigError(f"invalid --target {text!r}; allowed: {allowed}")
    check_one_of(metric.strip(), TARGET_METRICS, "--target metric")
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"invalid --target value {value!r}; allowed: a number") from None
    check(Convergence(target_metric=metric.strip(), target=number))  # range: accuracy <= 1
    return metric.strip(), number


def space(
    optimizer: str,
    conv: Convergence,
    batch_sizes: Sequence[int],
    rules: Sequence[str] | None = None,
) -> list[TargetConfig]:
    """The configurations: each batch size with the rate each rule gives it from the base rate
    (conv.lr, else the optimizer's default) at conv.base_batch_size. `rules` default to all,
    the optimizer's own (auto) first; a rate two rules give alike is kept once, under the first."""
    base = conv.lr if conv.lr is not None else DEFAULT_LR[optimizer]
    auto = conv.lr_scaling_for(optimizer)
    ordered = list(rules) if rules is not None else [*auto, *lr_scaling.RULES]
    out: dict[tuple[int, float], TargetConfig] = {}
    for rule in dict.fromkeys(ordered):
        check_one_of(rule, lr_scaling.RULES, "lr scaling rule")
        for b in batch_sizes:
            lr = lr_scaling.scaled_lr(base, rule, b, conv.base_batch_size)
            out.setdefault((b, round(lr, 12)), TargetConfig(b, rule, base, lr))
    return list(out.values())


@dataclass(frozen=True)
class TargetSearch:
    """What a target search covers and may spend: `budget_s` wall seconds; the fastest
    configurations re-run on `seeds` seeds in all; the batch sizes (None: the powers of two up
    to the training set's size) and lr-scaling rules (None: every rule); the top rung's
    training seconds (`max_time_s`; None: the settings' time limit) and step cap (`max_steps`;
    each lower rung its share of the top rung's time); `rungs` rungs, each `eta` times the
    last; the convergence `settings` (None: the shipped convergence suite's)."""

    budget_s: float
    seeds: int = 3
    batch_sizes: Sequence[int] | None = None
    rules: Sequence[str] | None = None
    max_time_s: float | None = None
    max_steps: int | None = None
    rungs: int = RUNG_COUNT
    eta: int = ETA
    settings: Convergence | None = None


def run_target(
    point: Point,
    target: str,
    search: TargetSearch,
    out: Path,
    options: RunOptions = RUN_OPTIONS,
    on_run: OnRun | None = None,
) -> TargetResult:
    """Search batch size x learning rate of `point`'s model on its device for the least
    training time to `target` ("METRIC=VALUE") within `search`'s budget, re-run the fastest on
    its seeds, write the run folder `out` and return the answer.

    Every run is `point` (its model and size, device, precision, optimizer, data and model
    options) at a configuration's batch size and lr-scaling rule, seeded `point.seed` (a
    contender's re-runs seed + 1, ...): a worker's convergence point under `options`' memory
    cap and point timeout. `point`'s batch size is ignored (the search sets each run's); its
    other settings must be at their defaults. Bad input raises ConfigError before anything is
    written."""
    model, size, optimizer = point.model, point.model_size, point.optimizer
    metric, value = parse_target(target)
    conv = search.settings or convergence_settings(optimizer)[1]
    check_one_of(optimizer, OPTIMIZERS, "--optimizer")
    others = [
        s.name
        for s in SETTINGS
        if s.name not in (*_OF_POINT, "model_size", "batch_size", "model_options")
        and getattr(point, s.name) != s.default
    ]
    if others:
        raise ConfigError(
            f"{', '.join(others)} with --target; allowed: their defaults (a target search "
            "trains the model at each batch size and learning rate it searches, nothing else)"
        )
    check_one_of(point.precision, PRECISIONS, "--precision")
    budget_s, seeds, max_steps = search.budget_s, search.seeds, search.max_steps
    if not budget_s > 0:
        raise ConfigError(f"invalid --budget {budget_s!r} s; allowed: above 0")
    if isinstance(seeds, bool) or seeds < 1:
        raise ConfigError(f"invalid --seeds {seeds!r}; allowed: 1 or more")
    if max_steps is not None and (isinstance(max_steps, bool) or max_steps < 1):
        raise ConfigError(f"invalid --steps {max_steps!r}; allowed: 1 or more")
    conv = dataclasses.replace(conv, target_metric=metric, target=value, stop_at_target=True)
    conv = conv.for_models((model,))  # the suite's tables name its other models too
    check(conv)
    check_models((model,), conv)
    if point.data != "device":  # science.convergence would make every run `unsupported`
        raise ConfigError(
            f"invalid --data {point.data!r} with --target; allowed: device (a convergence run "
            "keeps its data set on the device)"
        )
    model_kwargs = decode(point.model_options)
    # built in a worker: a factory that hangs or kills its process is one line (issue 43)
    with contextlib.closing(WorkerRunner(None, options.point_timeout_s)) as checker:
        preflight.check_built((model,), size, {model: model_kwargs}, checker, alone=True)
    try:
        ds, _ = catalog.load(model, size, conv.dataset, conv.data_dir, conv.image_size)
    except ValueError as e:
        raise ConfigError(str(e)) from e
    top_s = search.max_time_s if search.max_time_s is not None else conv.time_limit_s()
    if top_s is None:
        raise ConfigError("a target search needs a training-time limit; allowed: --max-time S")
    timeout = options.point_timeout_s
    if timeout is not None and top_s >= timeout:
        raise ConfigError(
            f"top rung {seconds(top_s)} does not fit in --point-timeout {seconds(timeout)}; "
            "allowed: a training time below the point timeout"
        )
    try:
        ladder = Rungs.geometric(top_s, search.rungs, search.eta)
    except ValueError as e:
        raise ConfigError(str(e)) from e
    given = search.batch_sizes
    sizes = list(given) if given is not None else maxbatch.powers_of_two(ds.train_size)
    for b in sizes:
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= ds.train_size:
            raise ConfigError(
                f"invalid batch size {b!r}; allowed: 1 to the {ds.train_size} training "
                f"samples of {ds.name}"
            )
    configs = space(optimizer, conv, sizes, search.rules)
    base = dataclasses.replace(point, batch_size=1, model_options=encode(model_kwargs))
    fixed = TargetRecord(
        (),
        **{name: getattr(base, name) for name in _OF_POINT},
        size=size,
        model_options=decode(base.model_options),
        dataset=ds.name,
        metric=metric,
        target=value,
        budget_s=budget_s,
        max_steps=max_steps,
        eta=ladder.eta,
        rungs_s=tuple(ladder.limits_s),
        seeds=seeds,
        space={"batch_sizes": list(sizes), "configs": [dataclasses.asdict(c) for c in configs]},
    )
    started = time.perf_counter()
    with RunContext(Path(out), options) as run:
        run.open()
        run.capture_env([point.device], [point.precision], recalibrate=False)
        result = SearchResult(configs, ladder.eta, base.seed)
        train = _Runs(run, base, conv, metric, top_s, max_steps)

        def noted(trial: dict[str, Any]) -> None:
            _write_record(run.store, fixed, result, time.perf_counter() - started)
            if on_run is not None:
                on_run(trial)

        try:
            search_rungs(result, train, metric, value, ladder, budget_s, seeds, on_run=noted)
            spread = seed_spread(result, train, seeds, ladder, on_run=noted)
        finally:
            run.write_csv()
        elapsed = time.perf_counter() - started
        _write_record(run.store, fixed, result, elapsed, spread, finished=True)
    best = configs[result.best] if result.best is not None else None
    covered = (result.trials_measured(), len(configs), result.stopped_by_budget)
    return TargetResult(run.dir, metric, value, best, spread, elapsed, *covered)


@dataclass(frozen=True)
class _Runs:
    """The search's runs: each trains `base` at its configuration's batch size, lr-scaling
    rule and seed (`base`'s + the run's), under `conv` at its rate and rung's training time
    (and its share of `max_steps`, the top rung's step cap, of `top_s`), in `run`'s worker;
    its row goes to the results file marked with its place in the search."""

    run: RunContext
    base: Point
    conv: Convergence
    metric: str
    top_s: float
    max_steps: int | None

    def __call__(self, r: Request) -> TrialRun:
        c = r.config
        cap = self.max_steps
        steps = None if cap is None else max(1, math.ceil(cap * r.limit_s / self.top_s))
        task = dataclasses.replace(
            self.conv,
            lr=c.lr_base,
            lr_scaling=(c.lr_scaling,),
            max_time_s=r.limit_s,
            max_steps=steps,
            max_samples=None,
        )
        seed = self.base.seed + r.seed
        point = dataclasses.replace(
            self.base, batch_size=c.batch_size, seed=seed, lr_scaling=c.lr_scaling
        )
        t0 = time.perf_counter()
        row = self.run.runner.run(point, task)
        cost = time.perf_counter() - t0
        row.update(tune_run=r.index, tune_trial=r.trial, tune_rung=r.rung)
        row.update(tune_limit_s=r.limit_s, tune_cost_s=cost)
        self.run.store.append(row)
        return trial_run(row, self.metric, cost)


def trial_run(row: dict[str, Any], metric: str, cost_s: float) -> TrialRun:
    """What a convergence row says of a search's run."""
    values = [e[metric] for e in row.get("curve") or [] if e.get(metric) is not None]
    best = (max if HIGHER_IS_BETTER[metric] else min)(values) if values else None
    reached = row.get("time_to_target_s")
    return TrialRun(
        status=str(row["status"]),
        elapsed_s=float(row.get("wall_time_s") or 0.0),
        best_metric=best,
        time_to_target_s=float(reached) if reached is not None else None,
        cost_s=cost_s,
        error=row.get("error"),
    )
