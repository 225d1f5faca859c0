"""`tune` in speed mode: the search (gpubench.tune.search) over the space (gpubench.tune.space),
each configuration measured as a sweep measures a point (run.worker, the same harness and
rows), then the interleaved confirmation of the leaders (run.confirm) that the verdict uses.

Rounds 0 and 1 measure for 1/9 and 1/3 of the point's measuring time (its warm-up likewise, and
unprofiled); round 2 is the sweep's own measurement, so a finalist's row is a sweep's row. A
wall-clock budget covers the whole tune (start-up, max-batch and the environment capture
included): the plan (gpubench.tune.plan) learns what a trial costs as the search goes, sizes
each round so that all fit, and keeps the confirmation's reserve; each trial's measurement is
bounded to end by the search's deadline, which the worker's harness also checks at every step
boundary (gpubench.tune.trial: cut at a step, recorded as cut and never ranked; the worker is
killed only as the last resort), so the tune overruns its budget by no more than a trial's
first step (its compile) beyond what was planned.

A resumed tune replays the search on the figures of tune_rows.jsonl (store.tune_rows: the search
is a pure function of them), measuring only what is new, under a budget of its own.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench.config import loader as loader_axes
from gpubench.config import user_code
from gpubench.config.errors import ConfigError
from gpubench.config.model_options import encode
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.config.validate import validate
from gpubench.harness import timing
from gpubench.run import confirm as leads
from gpubench.run import preflight
from gpubench.run.batch_search import Probe
from gpubench.run.context import RunContext, RunOptions
from gpubench.store import env, tune_rows
from gpubench.store import tune_record as T
from gpubench.store.results import RESULTS_FILE, ResultStore, replace_durably
from gpubench.store.wording import seconds
from gpubench.tune import record as tune_record
from gpubench.tune import space as tune_space
from gpubench.tune import trial
from gpubench.tune.plan import Planner
from gpubench.tune.search import ROUNDS, Config, Cut, Outcome, Stop, search
from gpubench.tune.space_for import space_for
from gpubench.tune.trial import round_budget

OnTrial = Callable[[T.TrialRecord, "TuneRequest"], None]

# Every measurement is appended durably to store.tune_rows (marked with its `tune_round`, and
# `tune_cut` where the deadline cut it short); the results file holds each configuration's
# deepest round's row (its longest measurement), what the verdict and the report read, rewritten
# after each measurement.
UNBOUNDED = RunOptions(point_timeout_s=None)  # a tune called as a function: no point timeout


@dataclass(frozen=True)
class TuneRequest:
    """What the user asked: the model and its fixed choices, the axes they named (`named`:
    axis -> values; one value fixes it), the batch sizes (None: powers of two up to the
    max-batch limit), the wall-clock budget in seconds (None: none), `budget`: how a sweep
    measures a point (the last round's measurement)."""

    model: str
    size: str
    device: str
    optimizer: str
    data: str = "device"
    seed: int = 0
    model_options: dict[str, Any] = field(default_factory=dict)
    named: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    batch_sizes: tuple[int, ...] | None = None
    budget_s: float | None = None
    budget: Budget = field(default_factory=Budget)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["named"] = {k: list(v) for k, v in self.named.items()}
        out["budget"] = {  # JSON has no infinity: Budget.fixed's time limit is null
            k: None if isinstance(v, float) and math.isinf(v) else v
            for k, v in out["budget"].items()
        }
        return out

    @staticmethod
    def from_dict(d: dict[str, Any]) -> TuneRequest:
        # a time limit of null is infinite; a deadline of null is none
        limits: dict[str, Any] = {
            k: math.inf if v is None and k != "deadline" else v for k, v in d["budget"].items()
        }
        sizes = d.get("batch_sizes")
        return TuneRequest(
            **{k: d[k] for k in ("model", "size", "device", "optimizer", "data")},
            seed=int(d["seed"]),
            model_options=dict(d["model_options"]),
            named={k: tuple(v) for k, v in d["named"].items()},
            batch_sizes=None if sizes is None else tuple(sizes),
            budget_s=d.get("budget_s"),
            budget=Budget(**limits),
        )

    def base_point(self) -> Point:
        return Point(
            self.model,
            self.size,
            self.device,
            "fp32",
            self.optimizer,
            1,
            self.seed,
            self.data,
            model_options=encode(self.model_options or None),
            **loader_axes.default_fields(self.device, self.data),
        )


def sweep_spec(request: TuneRequest, space: tune_space.TuneSpace) -> SweepSpec:
    """The space as a sweep's suite (suite.json: what the folder's report names; the grid a
    sweep would measure over it; a fixed effective batch is its one batch size, accumulated in
    the searched steps)."""
    fields: dict[str, Any] = {tune_space.SPEC_FIELD[a]: space.values[a] for a in tune_space.AXES}
    e = space.effective_batch
    return validate(
        SweepSpec(
            name="tune",
            models=(request.model,),
            size=request.size,
            devices=(request.device,),
            batch_sizes=space.batch_sizes if e is None else (e,),
            accumulate=space.accumulate_values(),
            optimizers=(request.optimizer,),
            seeds=(request.seed,),
            data=request.data,
            budget=request.budget,
            model_options={request.model: request.model_options} if request.model_options else {},
            **fields,
        )
    )


def tune(
    request: TuneRequest,
    run_dir: Path,
    options: RunOptions = UNBOUNDED,
    *,
    on_trial: OnTrial | None = None,
    should_stop: Callable[[], bool] | None = None,
    started: float | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> T.TuneRecord:
    """Tune `request` into `run_dir` (see the module docstring) and return tune.json's record.
    `options`: each point's memory cap and timeout; with `resume`, `run_dir` holds a tune to go
    on with: its own request is used, with this `request`'s budget_s; `confirm`: the leaders
    confirmed at the end. `should_stop` (Ctrl-C, say) is asked before each measurement: once it
    says stop, the search ends there and nothing is confirmed. `started`: the
    time.perf_counter() reading from which the budget counts (None: now; the command line's
    tune counts from its process's start). `on_progress` is given a line, elapsed and budget
    first, as each max-batch probe ends and each trial starts."""
    started = time.perf_counter() if started is None else started
    resume, saved = options.resume, None
    if resume:
        saved, request = _saved_record(run_dir, request.budget_s, request.model)
    clock = _Clock(started, request.budget_s, on_progress)
    with RunContext(run_dir, options) as run:
        run.open(rows=run_dir / tune_rows.FILE)
        # built in the run's worker: a factory that hangs or kills its process is one line
        # (issue 43), not this process hung or killed
        options_of = {request.model: dict(request.model_options or {})}
        preflight.check_built((request.model,), request.size, options_of, run.runner, alone=True)
        if not resume and (run_dir / T.FILE).exists():
            raise ConfigError(
                f"run folder {str(run_dir)!r} already holds a tune; continue it with "
                f"--resume {run_dir}, or choose another --out"
            )
        clock.say(
            "the space: the model's axes, max-batch's memory model where no batch sizes given"
        )
        base = request.base_point()
        space = space_for(request, base, run_dir, options, clock.probe_line)
        spec = sweep_spec(request, space)
        # one worker for the check, the environment capture and the trials: a worker's start
        # (on an H100 about 4 s each of the 22 s tune spent before its first trial) paid once
        preflight.check_models(spec, options.max_memory, options.point_timeout_s, run.runner)
        run.write_suite(spec)
        if not (run_dir / env.ENV_FILE).is_file():
            clock.say("capturing the environment")
        run.capture_env(spec.resolved_devices(), space.values["precision"], in_worker=True)
        trials = _Trials(run, request, space, clock, saved, should_stop, on_trial)
        outcome = search(
            space.space, trials.measure, trials.deadline_passed, trials.planner, note=clock.say
        )
        record = trials.searched(outcome)
        if interrupted := should_stop is not None and should_stop():
            stopped = "stopped on request (Ctrl-C): nothing confirmed"
            record = dataclasses.replace(record, stopped=stopped)
        if options.confirm and trials.measurements and not interrupted:
            clock.say("confirming the leaders (interleaved)")
            run.confirm(spec)  # in fresh workers of its own, as the sweep does
        record = dataclasses.replace(
            record,
            verdict=_verdict(run_dir) if trials.measurements else None,
            elapsed_s=trials.offset + clock.now(),
            overrun_s=None if request.budget_s is None else clock.now() - request.budget_s,
        )
        record.write(run_dir)
    return record


@dataclass
class _Clock:
    """The budget's clock (seconds since `started`, a time.perf_counter() reading), the
    progress lines stamped with it, and the seconds each max-batch probe took."""

    started: float
    budget_s: float | None
    on_progress: Callable[[str], None] | None
    probe_s: list[float] = field(default_factory=list)

    def now(self) -> float:
        return time.perf_counter() - self.started

    def say(self, text: str) -> None:
        if self.on_progress is not None:
            of = "" if self.budget_s is None else f" / {seconds(self.budget_s)}"
            self.on_progress(f"[{seconds(self.now()):>8}{of}] {text}")

    def probe_line(self, p: Probe) -> None:
        self.probe_s.append(p.seconds)
        self.say(
            f"max-batch: B={p.batch_size} {'fits' if p.fits else p.status} ({seconds(p.seconds)})"
        )


class _Trials:
    """The search's measurements: `measure` is given each configuration and round. A new one
    is measured as a sweep measures a point (RunContext.measure), bounded to end by the plan's
    deadline; its row goes to tune_rows.jsonl, the results file is rewritten, and tune.json with
    it. One measured before a resume (and not cut) is replayed from its row."""

    def __init__(
        self,
        run: RunContext,
        request: TuneRequest,
        space: tune_space.TuneSpace,
        clock: _Clock,
        saved: T.TuneRecord | None,
        should_stop: Callable[[], bool] | None,
        on_trial: OnTrial | None,
    ) -> None:
        self.run, self.request, self.space, self.clock = run, request, space, clock
        self.should_stop, self.on_trial = should_stop, on_trial
        self.offset = saved.elapsed_s if saved else 0.0  # the time of the runs before
        self.old_elapsed = {t.number: t.elapsed_s for t in saved.trials} if saved else {}
        self.record = T.TuneRecord(request.to_dict(), space.to_dict())
        self.measurements = tune_rows.read(run.dir) or []
        # a cut measurement is measured again (it never counted)
        self.done = {
            (Point.of(r).key(), int(r["tune_round"])): r
            for r in self.measurements
            if not r.get("tune_cut")
        }
        self.rows: list[dict[str, Any]] = []
        limits = [trial.measuring_limit_s(round_budget(request.budget, r)) for r in range(ROUNDS)]
        self.planner = Planner(
            request.budget_s,
            clock.now,
            [x if math.isfinite(x) else 0.0 for x in limits],
            leads.SHARE,
            own_fixed_s=clock.now(),
            prior_fixed_s=statistics.median(clock.probe_s) if clock.probe_s else 0.0,
            fewest_steps=timing.fewest_steps(request.budget),
        )

    def deadline_passed(self) -> bool:
        if self.should_stop is not None and self.should_stop():
            return True
        left = self.planner.left_s()
        return left is not None and left <= 0

    def measure(self, config: Config, rnd: int) -> float | None:
        """`config`'s samples/s in round `rnd` (None: it has none); Cut where the deadline
        cut its measurement short, Stop where not even its fixed cost fits before it."""
        point = self.space.point(config)
        row = self.done.get((point.key(), rnd))
        if row is None:
            row, extra = self._measured(config, point, rnd)
            elapsed = self.offset + self.clock.now()
        else:
            budget = round_budget(self.request.budget, rnd, self.planner.scale())
            extra = {"_budget_s": budget.max_time_s}
            elapsed = self.old_elapsed.get(len(self.rows), self.offset)
        sps = row.get("samples_per_s") if row.get("status") == "ok" else None
        self.rows.append({**row, **extra, "_config": config, "_elapsed_s": elapsed})
        trials = tuple(tune_record.trials(self.rows, None))
        self.record = dataclasses.replace(self.record, trials=trials, elapsed_s=elapsed)
        self.record.write(self.run.dir)
        if self.on_trial is not None:
            self.on_trial(self.record.trials[-1], self.request)
        if extra.get("_cut"):
            raise Cut(None if sps is None else float(sps))
        return None if sps is None else float(sps)

    def _measured(
        self, config: Config, point: Point, rnd: int
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A new measurement's row (appended to tune_rows.jsonl) and what the trial notes of it:
        its budget, start, wall time and cost, and whether the deadline cut it."""
        budget = round_budget(self.request.budget, rnd, self.planner.scale())
        left, cut = self.planner.left_s(), False
        fixed = self.planner.fixed_s(config.combo, config.batch_size)
        if left is not None:
            if left - fixed <= 0:
                raise Stop  # not even its fixed cost fits: the search ends here
            budget, cut = trial.bounded(budget, left - fixed)
            budget = trial.with_deadline(budget, left)
            timeout = self.run.options.point_timeout_s
            self.run.runner.point_timeout_s = trial.kill_after_s(left - fixed, fixed, timeout)
        number = len(self.rows)
        self.clock.say(
            f"round {rnd} trial {number}: {point.label()}"
            + (" (cut to the deadline)" if cut else "")
        )
        began = self.clock.now()
        measured = self.run.measure(point, budget)
        row = measured.row
        cut = cut or bool(row.get("deadline_cut"))
        cut = cut or (left is not None and row["status"] == "timeout")
        row["tune_round"] = rnd
        if cut:
            row["tune_cut"] = True
        tune_rows.append(self.run.dir, row)
        self.measurements.append(row)
        write_results(self.run.dir, self.measurements)
        fresh = measured.worker_s > 0  # a worker started for it
        c = trial.cost(config, rnd, row, measured.wall_s, self.planner.scale(), budget, fresh)
        self.planner.observe(c)
        return row, {
            "_budget_s": budget.max_time_s,
            "_started_s": self.offset + began,
            "_wall_s": measured.wall_s,
            "_fixed_s": c.fixed_s,
            "_measuring_s": c.measuring_s,
            "_cut": cut,
        }

    def searched(self, outcome: Outcome) -> T.TuneRecord:
        """The record once the search has ended (tune.json written): its best, coverage,
        plan, what it dropped, and the deadline it had."""
        if self.measurements:
            write_results(self.run.dir, self.measurements)
        record = tune_record.filled(
            self.record, outcome, self.rows, self.request.budget_s, self.space, self.planner
        )
        left = self.planner.left_s()
        deadline_s = None if left is None else self.offset + self.clock.now() + left
        self.record = dataclasses.replace(record, search_deadline_s=deadline_s)
        self.record.write(self.run.dir)
        return self.record


def _saved_record(
    run_dir: Path, budget_s: float | None, given_model: str = ""
) -> tuple[T.TuneRecord, TuneRequest]:
    """The tune.json a resumed tune goes on from (store.tune_record), and its request, with
    `budget_s` (a resume's own budget). A model the folder names by import path is refused
    unless the user gave it again (`given_model`): a folder is data (config.user_code)."""
    if not (run_dir / T.FILE).is_file():
        raise ConfigError(
            f"nothing to resume in {str(run_dir)!r}: it has no {T.FILE}; "
            "allowed: the folder of a tune started by gpubench"
        )
    saved = T.read(run_dir)
    try:
        request = TuneRequest.from_dict(saved.request)
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"cannot read {run_dir / T.FILE}: {e}") from None
    if given_model and given_model != request.model:
        raise ConfigError(
            f"tune --resume {run_dir} goes on with that folder's own model "
            f"({request.model!r}), so --model {given_model} cannot change it"
        )
    user_code.check_given((request.model,), (given_model,), str(run_dir / T.FILE), "--model")
    return saved, dataclasses.replace(request, budget_s=budget_s)


def _verdict(run_dir: Path) -> dict[str, Any] | None:
    """The verdict on the folder (what `explain` says), in brief for tune.json."""
    from gpubench.report.explain import explain_runs

    found, _ = explain_runs([run_dir])
    if not found:
        return None
    v = found[0]
    return {
        "winner": None if v.ties else v.identity,
        "leader": v.fastest,
        "leader_samples_per_s": v.samples_per_s,
        "ties": [t["label"] for t in v.ties],
        "headline": v.headline(),
        "confidence": v.confidence,
        "confirmation_status": (v.confirmation or {}).get("status"),
    }


def deepest(measurements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per configuration: its deepest round's, in the order configurations were first
    measured; a measurement the deadline cut short (`tune_cut`) is never one of them."""
    by_point: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in measurements:
        if row.get("tune_cut"):
            continue
        key = Point.of(row).key()
        if key not in by_point or int(row["tune_round"]) >= int(by_point[key]["tune_round"]):
            by_point[key] = row
    return list(by_point.values())


def write_results(run_dir: Path, measurements: list[dict[str, Any]]) -> None:
    """Replace the results file by the deepest row of each configuration, atomically and
    durably, and results.csv with it."""
    text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in deepest(measurements))
    replace_durably(run_dir / RESULTS_FILE, text)
    ResultStore(run_dir).write_csv()
