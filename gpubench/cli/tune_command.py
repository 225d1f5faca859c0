"""`gpubench tune`: run the search (gpubench.tune.tuner), print a line per measurement, then
what it covered, the one-off costs, the verdict and the report's path."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from gpubench.cli import commands, console
from gpubench.cli.tune_args import budget_s, request_from_args
from gpubench.config import labels
from gpubench.config.errors import ConfigError
from gpubench.probes.process_age import process_age_s
from gpubench.run.context import RunOptions
from gpubench.run.interrupt import GracefulStop
from gpubench.run.sweep import default_run_dir
from gpubench.store import tune_record as T
from gpubench.store.results import RESULTS_FILE
from gpubench.store.wording import number, percent, seconds
from gpubench.tune.record import combo_of
from gpubench.tune.tuner import TuneRequest, tune


def run(args: argparse.Namespace) -> int:
    """Exit status 0 when the tune measured a configuration (whatever the others' status); 1
    when it measured none (every measurement failed: a script or CI must not take that for an
    answer); 2 for a usage error; 130 when Ctrl-C stopped it (what was measured is kept:
    --resume goes on)."""
    if args.target is not None:
        return _run_target(args)
    # --budget is wall-clock for the whole command: run as a command, the interpreter's start
    # and imports count too
    age = process_age_s() if getattr(args, "own_process", False) else None
    started = time.perf_counter() - (age or 0.0)
    request = request_from_args(args)
    run_dir: Path = args.resume or args.out or default_run_dir()
    print(f"tune -> {run_dir}", flush=True)
    try:
        with GracefulStop(lambda: console.stopping(True)) as stop:
            record = tune(
                request,
                run_dir,
                RunOptions(
                    args.max_memory,
                    args.point_timeout,
                    resume=args.resume is not None,
                    confirm=args.confirm,
                ),
                on_trial=None if args.quiet else trial_line,
                on_progress=None if args.quiet else progress_line,
                should_stop=lambda: stop.requested,
                started=started,
            )
    except KeyboardInterrupt:
        print(f"stopped; go on with: python -m gpubench tune --resume {run_dir}", file=sys.stderr)
        return 130
    summary(record, run_dir)
    reported = time.perf_counter()
    if (stopped := _report_and_verdict(run_dir)) is not None:
        return stopped
    print(
        f"report and verdict: {seconds(time.perf_counter() - reported)} after the search "
        f"and its confirmation ({seconds(time.perf_counter() - started)} in all, "
        "--budget counts up to them)"
    )
    if record.best is None:
        why = (
            f"{len(record.trials)} measurements, none ok; each one's row says why: "
            f"{run_dir / RESULTS_FILE}"
            if record.trials
            else f"{record.stopped or 'the search ended'} before its first measurement"
        )
        print(f"gpubench: error: the tune measured no configuration ({why})", file=sys.stderr)
        return 1
    return 0


def _run_target(args: argparse.Namespace) -> int:
    """`tune --target`: batch size x learning rate by time to the target (gpubench.tune.target).
    The flags tune shares with sweep are read as the plain tune reads them (request_from_args)
    and reach every run; the speed search's axis flags other than one precision are refused."""
    from gpubench.config.model_options import encode
    from gpubench.config.spec import Point
    from gpubench.config.suite import convergence_settings
    from gpubench.tune.target import TargetSearch, parse_target, run_target

    if args.resume is not None:
        raise ConfigError("tune --target has no --resume; start a new search with --out DIR")
    parse_target(args.target)  # a malformed target is refused before anything is written
    request = request_from_args(args)
    named = dict(request.named)
    precisions = named.pop("precision", ("fp32",))
    if len(precisions) != 1:
        raise ConfigError(
            f"tune --target takes one precision, not {','.join(precisions)}; e.g. --precisions fp32"
        )
    if named:
        flag = "--" + next(iter(named)).replace("_", "-")
        raise ConfigError(
            f"tune --target searches batch size x learning rate, so {flag} "
            "does not apply; allowed: --batch-sizes and one --precisions value"
        )
    out: Path = args.out or default_run_dir()
    print(f"tune --target {args.target} -> {out}", flush=True)

    def run_line(r: dict[str, Any]) -> None:
        print(f"  {r['label']} rung {r['rung']}: {r['decision']} ({r['reason']})", flush=True)

    size = args.size or convergence_settings(request.optimizer)[0]  # the convergence suite's
    point = Point(
        request.model,
        size,
        request.device,
        precisions[0],
        request.optimizer,
        1,  # each run's batch size is the search's
        request.seed,
        request.data,
        model_options=encode(request.model_options),
    )
    search = TargetSearch(
        budget_s(args),
        args.seeds,
        request.batch_sizes,
        max_time_s=args.max_time,
        max_steps=args.steps,
    )
    options = RunOptions(args.max_memory, args.point_timeout)
    result = run_target(point, args.target, search, out, options, None if args.quiet else run_line)
    print(result.describe())
    _report_and_verdict(out)
    return 0


def progress_line(text: str) -> None:
    """A line of progress (a max-batch probe, a trial starting), elapsed and budget first."""
    print(f"  {text}", flush=True)


def trial_line(trial: T.TrialRecord, request: TuneRequest) -> None:
    """One measurement, as it ends: round, time, configuration, samples/s, best so far."""
    c = trial.config
    what = labels.label(c, among=("compile",))
    figure = f"{number(trial.samples_per_s)} samples/s" if trial.samples_per_s else trial.status
    if trial.cut:
        figure += " (cut by the deadline: not ranked)"
    best = trial.best_so_far_samples_per_s
    print(
        f"  round {trial.round} [{seconds(trial.elapsed_s):>8}] {what}: {figure}"
        + (f" (best so far {number(best)})" if best else ""),
        flush=True,
    )


def summary(record: T.TuneRecord, run_dir: Path) -> None:
    """What the search covered, why it ended, its best, and the one-off compile costs."""
    cov = record.coverage
    plan = record.plan or {}
    if plan.get("measure_all"):
        print(f"search: measured the whole space: {plan['measure_all_why']}")
    elif plan.get("measure_all_why"):
        print(f"search: {plan['measure_all_why']}")
    ended = "ran all its rounds" if record.finished else f"stopped early ({record.stopped})"
    print(
        f"search: {ended}; measured {cov.get('configurations_measured', 0)} of "
        f"{cov.get('space_size', 0)} configurations ({percent(cov.get('fraction', 0.0))} of the "
        f"space; {cov.get('combos_measured', 0)} of {cov.get('combos', 0)} setting combinations) "
        f"in {len(record.trials)} measurements, {seconds(record.elapsed_s)}"
    )
    if record.best is not None:
        b = record.best
        print(f"best of the search: {b['config']} at {number(b['samples_per_s'])} samples/s")
    for one in record.one_off:
        print(f"one-off: torch.compile took {seconds(one['compile_time_s'])} for {one['combo']}")
    for line in dropped_lines(record):
        print(line)
    if record.overrun_s is not None:
        over = record.overrun_s
        print(
            f"budget: {'over' if over > 0 else 'under'} by {seconds(abs(over))} before the report"
        )
    print(f"trajectory: {run_dir / T.FILE}")


def dropped_lines(record: T.TuneRecord) -> list[str]:
    """What the search measured and dropped, with why (issue 42: never "not measured" for a
    setting that ran): the combos dropped as far slower than the best (the search's own
    words), and each compiled combo none of whose trials was ranked (cut by the deadline or
    failed), with the compile's seconds against the budget."""
    out = list((record.plan or {}).get("dropped", []))
    budget = record.request.get("budget_s")
    of = f" of a {seconds(budget)} budget" if budget is not None else ""
    by_combo: dict[str, list[T.TrialRecord]] = {}
    for t in record.trials:
        by_combo.setdefault(json.dumps(combo_of(t.config), sort_keys=True), []).append(t)
    for trials in by_combo.values():
        combo = combo_of(trials[0].config)  # in the space's order
        if combo.get("compile") != "compile" or any(
            t.samples_per_s is not None and not t.cut for t in trials
        ):
            continue
        spent = [t.compile_time_s or t.fixed_s or t.wall_s or 0.0 for t in trials]
        name = labels.settings(combo)
        how = "cut by the deadline" if any(t.cut for t in trials) else "no figure"
        out.append(
            f"dropped: {name}: compile took {seconds(max(spent))}{of} ({len(trials)} trial"
            f"{'s' if len(trials) != 1 else ''}, {how}: measured, not ranked)"
        )
    return out


def _report_and_verdict(run_dir: Path) -> int | None:
    """The tune's report and verdict: None, or the exit status (143, 130) where SIGTERM or
    Ctrl-C stopped the report (its one line printed: commands.drawn_report)."""
    if not (run_dir / RESULTS_FILE).is_file():
        print("no configuration was measured: nothing to conclude")
        return None
    stopped = commands.render_report(run_dir)
    if stopped is None:
        commands.print_verdict([run_dir])
    return stopped
