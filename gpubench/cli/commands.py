"""What each command runs (the sweep with its Ctrl-C handling and report, report, compare,
max-batch, list, env); what they print is console.py's job."""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from gpubench.cli import max_batch_args, sweep_args, values
from gpubench.config import user_code
from gpubench.config.errors import ConfigError
from gpubench.config.spec import DEFAULT_POINT_TIMEOUT_S, Budget, Point, SweepSpec
from gpubench.run.memory_cap import exact_size
from gpubench.store.results import RESULTS_FILE
from gpubench.store.wording import plural

if TYPE_CHECKING:
    from gpubench.run.context import RunOptions
    from gpubench.run.maxbatch import MaxBatch
    from gpubench.store.results import RowNotWritten

# Each command imports what it uses when it runs (the console brings pandas and rich, a sweep
# torch and scipy, a report matplotlib): `--help`, `list` and a mistyped flag answer at once.

# The exit status of a sweep in which every point of some model ended `error`: it ran (its rows
# are kept), but a model measured nothing, which a script or CI must not take for success.
FAILED_MODEL = 1
# What the report and verdict after a sweep import (matplotlib above all): imported while the
# sweep's worker starts (run.sweep's `prepare`), not after its last point.
REPORT_MODULES = ("gpubench.report.build", "gpubench.report.explain", "concurrent.futures.process")
VERDICT_MODULES = ("gpubench.report.explain",)  # --no-report: the verdict's alone


def sweep(args: argparse.Namespace) -> int:
    """`gpubench sweep`: run the suite its flags name (cli.sweep_args) into --out (default
    results/<timestamp>), then print its tables, errors and verdict and render its report. Exit
    status 0; FAILED_MODEL where every point of some model ended `error`; 130 when Ctrl-C
    stopped it (the rows measured are kept either way). The opening line names the flags that
    changed the suite."""
    from gpubench.cli import console
    from gpubench.probes import process_tree
    from gpubench.run import phases
    from gpubench.run.context import RunOptions
    from gpubench.run.interrupt import GracefulStop, Terminated
    from gpubench.run.sweep import run_sweep
    from gpubench.store.results import ResultsError

    spec = sweep_args.spec_from_args(args)
    out: Path | None = args.resume if args.resume is not None else args.out
    options = RunOptions(
        args.max_memory,
        args.point_timeout,
        resume=args.resume is not None,
        extend=args.extend,
        retry_failed=args.retry_failed,
        confirm=args.confirm,
        shard=args.shard,
        plan_file=args.plan,
        gpus=sweep_args.pool_devices(args),  # issue 53
        confirm_target=args.confirm_target,  # issue 51
    )
    if process_tree.under_torchrun():  # issue 17: this process is one rank of a torchrun launch
        return _launched_sweep(spec, out, options.point_timeout_s, args.report)
    run_dir = out if out is not None else reserved_run_dir()
    hint = resume_command(run_dir, options, spec, args.suite)
    progress = console.SweepProgress(spec, run_dir, args.quiet, sweep_args.overridden_flags(args))
    try:
        with GracefulStop(lambda: console.stopping(progress.measuring)) as stop:
            frame = run_sweep(
                spec,
                run_dir,
                on_row=progress.on_row,
                should_stop=lambda: stop.requested,
                on_start=progress.on_start,
                on_target_run=None if args.quiet else console.target_run,
                prepare=REPORT_MODULES if args.report else VERDICT_MODULES,
                **dataclasses.asdict(options),
            )
    except OSError as e:
        progress.stop()
        unwritten = _unwritten_row(e)
        if unwritten is not None:
            kept = unwritten.keep()
            where = (
                f"kept in {kept} (append it to {RESULTS_FILE})"
                if kept
                else f"this row (append it to {RESULTS_FILE}): {unwritten.line.strip()}"
            )
            what = (
                f"could not write {unwritten.filename!r} ({unwritten.strerror}); the point just "
                f"measured is {where}"
            )
        elif not (run_dir / RESULTS_FILE).is_file():
            raise  # nothing measured: the command's one line (cli.main)
        else:
            what = os_error_line(e) if e.filename else f"{e.strerror or e}: in {str(run_dir)!r}"
            what += f"; every row measured is in {RESULTS_FILE}"
        console.say(f"gpubench: error: {what}; {_once_fixed(e)}, resume with: {hint}")
        return 2
    except ResultsError:
        if not stop.requested:
            raise
        # Ctrl-C before the first point was measured: nothing to show, nothing lost
        progress.stop()
        console.stopped(hint, early=True)
        return 130
    except KeyboardInterrupt as e:
        progress.stop()
        console.stopped(hint, early=False)
        return 143 if isinstance(e, Terminated) else 130
    finally:
        progress.stop()
        if out is None:
            _drop_if_unused(run_dir)
    reported = time.time()
    console.sweep_summary(frame, run_dir, convergence=spec.mode == "convergence")
    stopped = render_report(run_dir, args.report)
    if stopped is not None:
        return stopped
    phases.add_phase(run_dir, phases.REPORT_PHASE, reported, time.time())
    print_verdict([run_dir])
    rows = frame.to_dict("records")
    failed = failed_models(rows)
    errors = [r for r in rows if r.get("status") == "error"]
    if errors:
        console.sweep_errors(errors, failed, run_dir)
    if stop.requested:
        console.stopped(hint, early=True)
        return 130
    return FAILED_MODEL if failed else 0


def _unwritten_row(e: BaseException) -> RowNotWritten | None:
    """The RowNotWritten `e` is or arose while handling (a full disk fails the writes after a
    row's too, phases.json's say, and the last of them is the one raised), else None."""
    from gpubench.store.results import RowNotWritten

    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, RowNotWritten):
            return seen
        seen = seen.__context__
    return None


def reserved_run_dir() -> Path:
    """A new results/<timestamp> folder, made now: two sweeps started in the same second
    without --out each get their own (the second takes the next suffix), never one folder."""
    from gpubench.run.sweep import default_run_dir

    while True:
        path = default_run_dir()
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue  # another sweep took it between the check and the mkdir


def _drop_if_unused(run_dir: Path) -> None:
    """Remove the reserved `run_dir` where the sweep wrote nothing into it (a mistake found
    before the first file): no empty folder is left behind under results/."""
    from gpubench.run.folder import LOCK_NAME

    if {p.name for p in run_dir.iterdir()} <= {LOCK_NAME}:
        (run_dir / LOCK_NAME).unlink(missing_ok=True)
        run_dir.rmdir()
        if not any(run_dir.parent.iterdir()):
            run_dir.parent.rmdir()  # results/, made with it


def failed_models(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The models (as a suite names them) every one of whose rows in `rows` has status `error`;
    a model with an `ok`, `oom`, `unsupported`, `diverged` or `timeout` row is not among them."""
    statuses: dict[str, set[str]] = {}
    for r in rows:
        statuses.setdefault(str(r["model"]), set()).add(str(r.get("status")))
    return [m for m, seen in statuses.items() if seen == {"error"}]


def _launched_sweep(
    spec: SweepSpec, out: Path | None, point_timeout_s: float | None, report: bool = True
) -> NoReturn:
    """One rank's part of a sweep under torchrun (--out required: every rank names the same
    folder); rank 0 prints each row and renders the report (where `report`: not with
    --no-report). The process ends here."""
    import os

    from gpubench.cli import console
    from gpubench.run import launched
    from gpubench.run.ranks import GROUP_TIMEOUT_S

    if out is None:
        raise ConfigError("under torchrun, give --out DIR (rank 0 writes the rows there)")
    timeout = point_timeout_s if point_timeout_s is not None else GROUP_TIMEOUT_S
    rank0 = os.environ.get("RANK") == "0"
    status = launched.run_launched(
        spec,
        out,
        timeout,
        on_row=lambda row: console.launched_row(row) if rank0 else None,
        # after a failure torchrun stops rank 0 once the others exit: report before they may
        on_failure=(lambda: render_report(out)) if report else None,
    )
    if rank0 and status == 0:
        render_report(out, report)
    # Leave without the interpreter's teardown: every row is on disk, but objects gloo still
    # holds can abort a rank as they are destructed (SIGABRT), and torchrun then fails the
    # whole launch after it succeeded (seen in CI, 8 ranks on 2 cores).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def render_report(run_dir: Path, draw: bool = True) -> int | None:
    """The sweep's report; a failure costs only the report (its rows are on disk): it is
    printed with the command that retries it, and the sweep still succeeds (None). Stopped by
    SIGTERM or Ctrl-C: one line (drawn_report) and the exit status, 143 or 130. Not `draw`
    (--no-report): only the line that says how to draw it, None."""
    from gpubench.cli import console

    if not draw:
        console.report_skipped(run_dir)
        return None
    try:
        return drawn_report([run_dir])
    except Exception as e:
        console.report_failed(run_dir, e)
        return None


def drawn_report(dirs: Sequence[str | Path], out: str | Path | None = None) -> int | None:
    """Draw the report of the run folders `dirs` (into `out`) and print its path: None. Where
    SIGTERM or Ctrl-C stops it, its chart workers are ended (report.build.made_in_parallel),
    one line says what stopped and the command that draws it again, and the exit status is
    returned: 143 (SIGTERM) or 130 (Ctrl-C). The rows are never touched by a report."""
    from gpubench.cli import console
    from gpubench.report import build_report
    from gpubench.run.interrupt import Terminated, terminated_raises

    dirs = _once_each(dirs)
    try:
        with terminated_raises():
            path = build_report(dirs, out)
    except KeyboardInterrupt as e:
        again = ["python -m gpubench report", *(shlex.quote(str(d)) for d in dirs)]
        if out is not None:
            again += ["--out", shlex.quote(str(out))]
        what = "SIGTERM" if isinstance(e, Terminated) else "Ctrl-C"
        console.say(
            f"gpubench: stopped ({what}) while drawing the report; the results are kept; draw "
            f"it again with: {' '.join(again)}"
        )
        return 143 if isinstance(e, Terminated) else 130
    console.report_path(path)
    return None


def merge(args: argparse.Namespace) -> int:
    """Join run folders into --out (run.merge), say which machines it joined, and render its
    report."""
    from gpubench.run.merge import merge as merge_runs

    dirs, out = args.dirs, args.out
    merged = merge_runs(dirs, out, args.allow_duplicates, args.across_machines)
    dropped = ""
    if merged.dropped:
        gave_way = f": {plural(merged.replaced, 'failed row')} gave way to a later ok row"
        dropped = f" ({plural(merged.dropped, 'duplicate row')} left out"
        dropped += f"{gave_way if merged.replaced else ''})"
    print(
        f"merged {plural(len(dirs), 'run folder')}: {plural(merged.rows, 'row')} -> {out}{dropped}"
    )
    if len(merged.machines) > 1:
        print(
            f"joined {len(merged.machines)} machines: {'; '.join(merged.machines)}. Each row "
            "keeps its own (host, device_name): the report names every row's device from it"
        )
    else:
        print(f"one machine: {''.join(merged.machines)}")
    if merged.confirmed:
        print(f"confirmations kept: {'; '.join(merged.confirmed)}")
    if merged.not_confirmed:
        print(
            f"not confirmed (rows from several run folders): {'; '.join(merged.not_confirmed)}; "
            f"{merged.how_to_confirm}"
        )
    stopped = render_report(out)
    return 0 if stopped is None else stopped


def print_verdict(dirs: list[Path], as_json: bool = False, margin_pct: float | None = None) -> None:
    """The verdict per model of the run folders `dirs` (the last thing a sweep or a tune
    prints; as JSON with `as_json`), with why there is none where there is none; a lead under
    `margin_pct` percent is a tie (None: the default margin)."""
    from gpubench.cli import console
    from gpubench.report.explain import cpu_energy_line, nothing_concluded, run_frame, run_verdicts
    from gpubench.report.runs import load_runs

    margin = [] if margin_pct is None else [margin_pct / 100]
    dirs = _once_each(dirs)
    try:
        runs = load_runs(dirs)
        frame = run_frame(runs)
        found = run_verdicts(runs, frame, *margin)
    except ValueError as e:  # a ResultsError is a ConfigError already
        raise ConfigError(str(e)) from e
    names, cpu_energy = [r.name for r in runs], cpu_energy_line(runs, frame)
    if as_json:
        verdicts = [v.to_dict() for v in found]
        print_json({"runs": names, "verdicts": verdicts, "cpu_energy": cpu_energy})
    else:
        console.verdict(found, names, nothing_concluded(dirs) if not found else "", cpu_energy)


def _once_each(dirs: Sequence[str | Path]) -> list[Path]:
    """The run folders `dirs`, each once (report.explain.distinct_folders), with a line on
    stderr for each name that repeats one."""
    from gpubench.cli import console
    from gpubench.report.explain import distinct_folders

    kept, notes = distinct_folders(dirs)
    for note in notes:
        console.say(f"gpubench: note: {note}")
    return [Path(d) for d in kept]


def explain(args: argparse.Namespace) -> int:
    """`gpubench explain DIR...`: the verdict of run folders (as JSON with --json), a lead
    under --margin percent being a tie."""
    print_verdict(args.dirs, args.json, args.margin)
    return 0


def report(args: argparse.Namespace) -> int:
    """`gpubench report DIR...`: the report of the run folders (a ResultsError: one line, main);
    143 or 130 where SIGTERM or Ctrl-C stopped it (drawn_report)."""
    stopped = drawn_report(args.dirs, args.out)  # a ResultsError: one line (main)
    return 0 if stopped is None else stopped


def compare(args: argparse.Namespace) -> int:
    """`gpubench compare BASE NEW`: two run folders point by point (`compare --ab` is
    cli.ab_command's)."""
    from gpubench.report.compare import THRESHOLD_PCT, format_comparison
    from gpubench.report.compare import compare as compare_runs

    threshold = args.threshold if args.threshold is not None else THRESHOLD_PCT
    result = compare_runs(args.base, args.new, threshold)
    sys.stdout.write(format_comparison(result, args.format) + "\n")
    return result.exit_code()


def _once_fixed(e: OSError) -> str:
    """When to resume after OS error `e` stopped a sweep: a full disk wants room, a refused
    write the permission; anything else its cause fixed."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return "once there is room"
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "once the folder is writable again"
    return "once that is fixed"


def resume_command(
    run_dir: Path, options: RunOptions, spec: SweepSpec | None = None, suite: str | None = None
) -> str:
    """The command line that continues the sweep in `run_dir` with the same isolation flags;
    where `spec` names code by import path, that code named again (a resume imports none of
    what a folder names: config.user_code): the suite file `suite` the user gave, else the
    models."""
    parts = ["python -m gpubench sweep --resume", shlex.quote(str(run_dir))]
    if spec is not None and user_code.import_paths((*spec.models, spec.loader)):
        if suite is not None and Path(suite).is_file():
            parts[0] = f"python -m gpubench sweep {shlex.quote(suite)} --resume"
        else:
            parts += ["--models", shlex.quote(",".join(spec.models))]
    if options.gpus:  # issue 53: the pool measures the rest too
        parts += ["--gpus", ",".join(options.gpus)]
    if options.confirm_target:  # issue 51: the runs to the target it lacks
        parts.append("--confirm-target")
    if options.max_memory is not None:
        parts += ["--max-memory", exact_size(options.max_memory)]
    timeout = options.point_timeout_s
    if timeout is not None and timeout != DEFAULT_POINT_TIMEOUT_S:
        parts += ["--point-timeout", f"{timeout:g}"]
    return " ".join(parts)


def os_error_line(e: OSError) -> str:
    """`e` (permission, not a folder, no space...) as one line naming the path it was about."""
    what = e.strerror or str(e) or type(e).__name__
    if e.filename is None:
        return f"{what} ({type(e).__name__})"
    second = f" -> {str(e.filename2)!r}" if e.filename2 is not None else ""
    return f"{what}: {str(e.filename)!r}{second}"


def max_batch(args: argparse.Namespace) -> int:
    """`gpubench max-batch`: search the largest batch of the point its flags name
    (cli.max_batch_args) that fits under the memory cap and print it; with --target-batch or
    --checkpoint, the largest micro-batch per checkpoint mode and the fewest accumulation steps
    for the target (run.accumulation_plan)."""
    point = max_batch_args.point_from_args(args)  # a bad flag is refused before torch loads

    from gpubench.cli import console
    from gpubench.config.model_options import decode
    from gpubench.harness.step import unsupported_reason
    from gpubench.run import accumulation_plan, maxbatch, preflight
    from gpubench.run.worker import WorkerRunner

    max_memory, point_timeout_s, as_json = args.max_memory, args.point_timeout, args.json
    target_batch, budget = args.target_batch, values.budget_from_args(args, Budget())
    # built in a worker: a factory that hangs or kills its process is met by the search's
    # probes under --point-timeout, not by this command (issue 43)
    options = {point.model: decode(point.model_options)}
    checker = WorkerRunner(None, point_timeout_s)
    try:
        preflight.check_built((point.model,), point.model_size, options, checker)
    finally:
        checker.close()
    reason = unsupported_reason(point)
    if reason is not None:
        raise ConfigError(f"{point.label(batch=False)}: {reason}")
    cap = max_memory if max_memory is not None else maxbatch.default_cap(point.device)
    console.max_batch_header(point, cap, chosen=max_memory is not None)

    def search(p: Point) -> MaxBatch:
        return maxbatch.find(
            p,
            cap,
            point_timeout_s,
            start=args.start,
            ceiling=args.ceiling,
            probe_steps=args.probe_steps,
            exact=args.exact,
            confirm_budget=budget,
            time_budget=budget if args.time else None,
            on_probe=None if as_json else console.probe_line,
        )

    if target_batch is not None or args.checkpoint is not None:  # issue 25
        modes = args.checkpoint or (["none", "blocks"] if target_batch is not None else ["none"])
        plan = accumulation_plan.measured(
            point, target_batch, modes, search, cap, budget, point_timeout_s
        )
        if as_json:
            print_json(plan.to_dict())
        else:
            console.accumulation_plan(plan)
        return 0
    result = search(point)
    if as_json:
        print_json(result.to_dict())
    else:
        console.max_batch_result(result)
    return 1 if result.measured_none else 0  # a search that measured nothing answered nothing


def print_json(value: Any) -> None:
    """`value` as indented JSON on stdout, then a newline (what JSON lacks, a Path or a
    timestamp, as its str)."""
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def list_all(args: argparse.Namespace) -> int:
    import torch

    from gpubench.cli import console
    from gpubench.config.suite import shipped_names
    from gpubench.models import describe

    devices = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
    suites = shipped_names()
    console.listing(describe(), devices, suites)
    return 0


def show_env(args: argparse.Namespace) -> int:
    from gpubench.store import env

    print_json(env.capture())
    return 0
