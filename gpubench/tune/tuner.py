"""`tune` in speed mode: the search (gpubench.tune.search) over the space (gpubench.tune.space),
each configuration measured as a sweep measures a point (run.worker, the same harness and
rows), then the interleaved confirmation of the leaders (run.confirm) that the verdict uses.

Rounds 0 and 1 measure for 1/9 and 1/3 of the point's measuring time (its warm-up likewise, and
unprofiled); round 2 is the sweep's own measurement, so a finalist's row is a sweep's row. A
wall-clock budget covers the whole tune: the search stops starting measurements once it has
spent 1/(1 + confirm.SHARE) of it (max-batch and the environment capture included), leaving the
rest to the confirmation, whose cost is that share of the measuring time.

A resumed tune replays the search on the figures of tune_rows.jsonl (the search is a pure
function of them), measuring only what is new, under a budget of its own.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.model_options import check_buildable, encode
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.config.validate import validate
from gpubench.harness.timing import min_samples_for_ci
from gpubench.probes import nvml
from gpubench.run import calibration_process, folder, preflight
from gpubench.run import confirm as leads
from gpubench.run.worker import WorkerRunner
from gpubench.science import bottleneck
from gpubench.science.leaders import CONFIDENCE
from gpubench.store.results import ResultStore, read_rows
from gpubench.tune import rows as tune_rows
from gpubench.tune import space as tune_space
from gpubench.tune import trajectory as T
from gpubench.tune.search import ROUNDS, Config, Outcome, round_scale, search
from gpubench.tune.space_for import space_for

OnTrial = Callable[[T.TrialRecord, "TuneRequest"], None]


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
        budget = Budget(**{k: math.inf if v is None else v for k, v in d["budget"].items()})
        sizes = d.get("batch_sizes")
        return TuneRequest(
            d["model"],
            d["size"],
            d["device"],
            d["optimizer"],
            d["data"],
            int(d["seed"]),
            dict(d["model_options"]),
            {k: tuple(v) for k, v in d["named"].items()},
            None if sizes is None else tuple(sizes),
            d.get("budget_s"),
            budget,
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
        )


def round_budget(budget: Budget, rnd: int) -> Budget:
    """How round `rnd` measures a point: the sweep's `budget` in the last round; before it,
    its times (warm-up and measuring) scaled by search.round_scale and no profile; a budget of
    a fixed step count has its steps scaled instead (never under the fewest steps with an
    interval of the median)."""
    if rnd == ROUNDS - 1:
        return budget
    scale = round_scale(rnd)
    out = dataclasses.replace(
        budget,
        warmup_min_s=budget.warmup_min_s * scale,
        warmup_max_s=budget.warmup_max_s * scale,
        min_time_s=budget.min_time_s * scale,
        max_time_s=budget.max_time_s * scale,
        profile_steps=0,
    )
    if budget.min_steps == budget.max_steps:  # Budget.fixed: a step count, not a time
        steps = max(min_samples_for_ci(CONFIDENCE), math.ceil(budget.max_steps * scale))
        out = dataclasses.replace(out, min_steps=steps, max_steps=steps)
    return out


def sweep_spec(request: TuneRequest, space: tune_space.TuneSpace) -> SweepSpec:
    """The space as a sweep's suite (suite.json: what the folder's report names; the grid a
    sweep would measure over it; a fixed effective batch is its one batch size, accumulated in
    the searched steps)."""
    fields = {tune_space.SPEC_FIELD[a]: space.values[a] for a in tune_space.AXES}
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
    *,
    resume: bool = False,
    max_memory: int | None = None,
    point_timeout_s: float | None = None,
    on_trial: OnTrial | None = None,
    confirm: bool = True,
    should_stop: Callable[[], bool] | None = None,
    started: float | None = None,
) -> T.TuneRecord:
    """Tune `request` into `run_dir` (see the module docstring) and return tune.json's record.
    With `resume`, `run_dir` holds a tune to go on with: its own request is used, with this
    `request`'s budget_s. `should_stop` (Ctrl-C, say) is asked before each measurement: once it
    says stop, the search ends there and nothing is confirmed. `started`: the
    time.perf_counter() reading from which the budget counts (None: now; the command line's
    tune counts from its process's start)."""
    started = time.perf_counter() if started is None else started
    if resume:
        saved = _saved_record(run_dir)
        request = dataclasses.replace(
            TuneRequest.from_dict(saved["request"]), budget_s=request.budget_s
        )
        offset = float(saved.get("elapsed_s") or 0.0)
        old_elapsed = {int(t["number"]): float(t["elapsed_s"]) for t in saved.get("trials", [])}
    else:
        offset, old_elapsed = 0.0, {}
    options = {request.model: request.model_options}
    check_buildable((request.model,), request.size, options)
    base = request.base_point()

    def deadline_passed() -> bool:
        if should_stop is not None and should_stop():
            return True
        if request.budget_s is None:
            return False
        return time.perf_counter() - started >= request.budget_s / (1 + leads.SHARE)

    with folder.locked(run_dir):
        if resume:
            folder.check_same_machine(run_dir)
            folder.repair_torn_tail(run_dir / tune_rows.FILE)  # a crash in mid-write
        else:
            folder.check_fresh(run_dir)
            if (run_dir / T.FILE).exists():
                raise ConfigError(
                    f"run folder {str(run_dir)!r} already holds a tune; continue it with "
                    f"--resume {run_dir}, or choose another --out"
                )
        space = space_for(request, base, run_dir, max_memory, point_timeout_s)
        spec = sweep_spec(request, space)
        preflight.check_models(spec, max_memory, point_timeout_s)
        store = ResultStore(run_dir)
        store.write_json("suite.json", spec.to_dict())
        if not (run_dir / "env.json").is_file():
            # as a sweep does: in a worker, which gives back the GPU memory it used (issue 28)
            captured = calibration_process.captured(
                [request.device], space.values["precision"], True, timeout_s=point_timeout_s
            )
            store.write_json("env.json", captured)
        nvml.warn_if_unavailable(spec.resolved_devices())
        record = T.TuneRecord(request.to_dict(), space.to_dict())
        measurements = tune_rows.read_measurements(run_dir)
        done = {(Point.of(r).key(), int(r["tune_round"])): r for r in measurements}
        runner = WorkerRunner(max_memory, point_timeout_s)
        trial_rows: list[dict[str, Any]] = []

        def measure(config: Config, rnd: int) -> float | None:
            point = space.point(config)
            row = done.get((point.key(), rnd))
            number = len(trial_rows)
            if row is None:
                row = bottleneck.classified(runner.run(point, round_budget(request.budget, rnd)))
                row["tune_round"] = rnd
                tune_rows.append(run_dir, row)
                measurements.append(row)
                tune_rows.write_results(run_dir, measurements)
                elapsed = offset + time.perf_counter() - started
            else:
                elapsed = old_elapsed.get(number, offset)
            sps = row.get("samples_per_s") if row.get("status") == "ok" else None
            trial_rows.append({**row, "_config": config, "_elapsed_s": elapsed})
            record.trials = _trials(trial_rows, request.budget, None)
            record.elapsed_s = elapsed
            store.write_json(T.FILE, record.to_dict())
            if on_trial is not None:
                on_trial(record.trials[-1], request)
            return None if sps is None else float(sps)

        try:
            outcome = search(space.space, measure, deadline_passed)
        finally:
            runner.close()
        if measurements:
            tune_rows.write_results(run_dir, measurements)
        _fill(record, outcome, trial_rows, request, space)
        store.write_json(T.FILE, record.to_dict())
        interrupted = should_stop is not None and should_stop()
        if interrupted:
            record.stopped = "stopped on request (Ctrl-C): nothing confirmed"
        if confirm and measurements and not interrupted:
            leads.confirm(run_dir, read_rows(run_dir), max_memory, point_timeout_s)
        record.verdict = _verdict(run_dir) if measurements else None
        record.elapsed_s = offset + time.perf_counter() - started
        store.write_json(T.FILE, record.to_dict())
    return record


def _saved_record(run_dir: Path) -> dict[str, Any]:
    path = run_dir / T.FILE
    if not path.is_file():
        raise ConfigError(
            f"nothing to resume in {str(run_dir)!r}: it has no {T.FILE}; "
            "allowed: the folder of a tune started by gpubench"
        )
    try:
        saved: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        TuneRequest.from_dict(saved["request"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"cannot read {path}: {e}") from None
    return saved


def _trials(
    trial_rows: list[dict[str, Any]], budget: Budget, outcome: Outcome | None
) -> list[T.TrialRecord]:
    """The trajectory: each trial's figures, its outcome (open until the search settles it),
    and the best so far."""
    outcomes = [t.outcome for t in outcome.trials] if outcome is not None else []
    plain = [
        {
            "config": r["_config"].settings(),
            "samples_per_s": r.get("samples_per_s") if r.get("status") == "ok" else None,
        }
        for r in trial_rows
    ]
    best = T.with_best_so_far(plain)
    out = []
    for n, r in enumerate(trial_rows):
        limit = round_budget(budget, int(r["tune_round"])).max_time_s
        out.append(
            T.TrialRecord(
                number=n,
                round=int(r["tune_round"]),
                config=plain[n]["config"],
                budget_s=limit if math.isfinite(limit) else None,
                status=str(r["status"]),
                samples_per_s=plain[n]["samples_per_s"],
                compile_time_s=r.get("compile_time_s"),
                point_time_s=r.get("point_time_s"),
                elapsed_s=float(r["_elapsed_s"]),
                outcome=outcomes[n] if outcomes else "open",
                best_so_far_samples_per_s=best[n][0],
                best_so_far_config=best[n][1],
            )
        )
    return out


def _fill(
    record: T.TuneRecord,
    outcome: Outcome,
    trial_rows: list[dict[str, Any]],
    request: TuneRequest,
    space: tune_space.TuneSpace,
) -> None:
    """The search's outcome into `record`: trials settled, rounds, coverage, best, one-offs."""
    record.trials = _trials(trial_rows, request.budget, outcome)
    record.rounds_decided = outcome.rounds_decided
    record.finished = outcome.rounds_decided == ROUNDS
    if outcome.stopped_in_round is not None:
        record.stopped = (
            f"budget: {request.budget_s:g} s reached in round {outcome.stopped_in_round} "
            f"(the rest kept for the confirmation)"
        )
    configs = {json.dumps(t.config, sort_keys=True) for t in record.trials}
    combos = {json.dumps(_combo(t.config), sort_keys=True) for t in record.trials}
    record.coverage = T.coverage(len(configs), space.space.size, len(combos), len(space.combos))
    if outcome.best is not None:
        deepest = max(t.round for t in outcome.trials if t.config == outcome.best)
        record.best = {
            "config": outcome.best.settings(),
            "samples_per_s": outcome.best_samples_per_s,
            "round": deepest,
        }
    seen: set[str] = set()
    for t in record.trials:
        combo = _combo(t.config)
        key = json.dumps(combo, sort_keys=True)
        if t.compile_time_s is not None and key not in seen:
            seen.add(key)
            record.one_off.append({"combo": combo, "compile_time_s": t.compile_time_s})
    record.rounds = _rounds(record.trials, request.budget)


def _combo(config: dict[str, Any]) -> dict[str, Any]:
    """A trial's settings less its size axis (the batch, or a fixed batch's accumulation)."""
    return {k: v for k, v in config.items() if k not in ("batch_size", "accumulate")}


def _rounds(trials: list[T.TrialRecord], budget: Budget) -> list[T.RoundRecord]:
    out = []
    for rnd in range(ROUNDS):
        mine = [t for t in trials if t.round == rnd]
        limit = round_budget(budget, rnd).max_time_s
        count = {o: sum(t.outcome == o for t in mine) for o in ("kept", "pruned", "failed")}
        out.append(
            T.RoundRecord(
                round=rnd,
                budget_s=limit if math.isfinite(limit) else None,
                measured=len(mine),
                final=sum(t.outcome == "final" for t in mine),
                open=sum(t.outcome == "open" for t in mine),
                ended_at_s=max((t.elapsed_s for t in mine), default=None),
                **count,
            )
        )
    return out


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
