"""What each command runs (the sweep with its Ctrl-C handling and report, report, compare,
max-batch, list, env); what they print is console.py's job."""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from gpubench.cli import console
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.run import accumulation_plan, maxbatch, phases
from gpubench.run.context import DEFAULT_POINT_TIMEOUT_S
from gpubench.run.interrupt import GracefulStop, Terminated
from gpubench.run.memory_cap import exact_size
from gpubench.run.sweep import default_run_dir, run_sweep
from gpubench.store.results import ResultsError, RowNotWritten
from gpubench.store.wording import plural

# The exit status of a sweep in which every point of some model ended `error`: it ran (its rows
# are kept), but a model measured nothing, which a script or CI must not take for success.
FAILED_MODEL = 1
# What the report and verdict after a sweep import (matplotlib above all): imported while the
# sweep's worker starts (run.sweep's `prepare`), not after its last point.
REPORT_MODULES = ("gpubench.report.build", "gpubench.report.explain", "concurrent.futures.process")


def sweep(
    spec: SweepSpec,
    out: Path | None,
    quiet: bool = False,
    *,
    resume: bool = False,
    extend: bool = False,
    max_memory: int | None = None,
    point_timeout_s: float | None = None,
    overridden: Sequence[str] = (),
    retry_failed: bool = False,
    shard: tuple[int, int] | None = None,
    confirm: bool = True,
    plan_file: Path | None = None,
) -> int:
    """Run `spec` into `out` (default results/<timestamp>), then print its tables, errors and
    verdict and render its report. Exit status 0; FAILED_MODEL where every point of some model
    ended `error`; 130 when Ctrl-C stopped it (the rows measured are kept either way).
    `overridden`: the flags that changed the suite, for the opening line."""
    from gpubench.run import launched

    if launched.under_torchrun():  # issue 17: this process is one rank of a torchrun launch
        return _launched_sweep(spec, out, point_timeout_s)
    run_dir = out if out is not None else reserved_run_dir()
    hint = resume_command(run_dir, max_memory, point_timeout_s)
    progress = console.SweepProgress(spec, run_dir, quiet, overridden)
    try:
        with GracefulStop(console.stopping_after_point) as stop:
            frame = run_sweep(
                spec,
                run_dir,
                on_row=progress.on_row,
                resume=resume,
                extend=extend,
                max_memory=max_memory,
                point_timeout_s=point_timeout_s,
                should_stop=lambda: stop.requested,
                on_start=progress.on_start,
                retry_failed=retry_failed,
                shard=shard,
                confirm=confirm,
                plan_file=plan_file,
                prepare=REPORT_MODULES,
            )
    except OSError as e:
        progress.stop()
        unwritten = _unwritten_row(e)
        if unwritten is not None:
            kept = unwritten.keep()
            where = (
                f"kept in {kept} (append it to results.jsonl)"
                if kept
                else f"this row (append it to results.jsonl): {unwritten.line.strip()}"
            )
            console.say(
                f"gpubench: error: could not write {unwritten.filename!r} "
                f"({unwritten.strerror}); the point just measured is {where}; once there is "
                f"room, resume with: {hint}"
            )
            return 2
        if not (run_dir / "results.jsonl").is_file():
            raise  # nothing measured: the command's one line (cli.main)
        from gpubench.cli.main import os_error_line

        what = os_error_line(e) if e.filename else f"{e.strerror or e}: in {str(run_dir)!r}"
        console.say(
            f"gpubench: error: {what}; every row measured is in results.jsonl; once there is "
            f"room, resume with: {hint}"
        )
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
    _render_report(run_dir)
    phases.add_phase(run_dir, phases.REPORT_PHASE, reported, time.time())
    _print_verdict([run_dir])
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
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, RowNotWritten):
            return seen
        seen = seen.__context__
    return None


def reserved_run_dir() -> Path:
    """A new results/<timestamp> folder, made now: two sweeps started in the same second
    without --out each get their own (the second takes the next suffix), never one folder."""
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


def _launched_sweep(spec: SweepSpec, out: Path | None, point_timeout_s: float | None) -> NoReturn:
    """One rank's part of a sweep under torchrun (--out required: every rank names the same
    folder); rank 0 prints each row and renders the report. The process ends here."""
    import os

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
        on_failure=lambda: _render_report(out),
    )
    if rank0 and status == 0:
        _render_report(out)
    # Leave without the interpreter's teardown: every row is on disk, but objects gloo still
    # holds can abort a rank as they are destructed (SIGABRT), and torchrun then fails the
    # whole launch after it succeeded (seen in CI, 8 ranks on 2 cores).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _render_report(run_dir: Path) -> None:
    """The sweep's report; a failure costs only the report (its rows are on disk): it is
    printed with the command that retries it, and the sweep still succeeds."""
    from gpubench.report import build_report

    try:
        console.report_path(build_report([run_dir]))
    except Exception as e:
        console.report_failed(run_dir, e)


def merge(
    dirs: list[Path], out: Path, allow_duplicates: bool, across_machines: bool = False
) -> int:
    """Join run folders into `out` (run.merge), say which machines it joined, and render its
    report."""
    from gpubench.run.merge import merge as merge_runs

    merged = merge_runs(dirs, out, allow_duplicates, across_machines)
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
    _render_report(out)
    return 0


def _print_verdict(dirs: list[Path]) -> None:
    """The verdict per model (the last thing a sweep prints)."""
    from gpubench.report.explain import explain_runs, nothing_concluded

    found, names = explain_runs(dirs)
    console.verdict(found, names, nothing_concluded(dirs) if not found else "")


def explain(dirs: list[Path], as_json: bool = False, margin_pct: float | None = None) -> int:
    """`gpubench explain DIR...`: the verdict of run folders (as JSON with `as_json`), a lead
    under `margin_pct` percent being a tie (None: the default margin)."""
    from gpubench.report.explain import explain_runs, nothing_concluded

    margin = [] if margin_pct is None else [margin_pct / 100]
    try:
        found, names = explain_runs(dirs, *margin)
        if not as_json:
            console.verdict(found, names, nothing_concluded(dirs) if not found else "")
            return 0
    except (ResultsError, ValueError) as e:
        raise ConfigError(str(e)) from e
    print_json({"runs": names, "verdicts": [v.to_dict() for v in found]})
    return 0


def report(dirs: list[Path], out: Path | None) -> int:
    from gpubench.report import build_report

    try:
        path = build_report(dirs, out)
    except ResultsError as e:
        raise ConfigError(str(e)) from e
    console.report_path(path)
    return 0


def compare(base: Path, new: Path, threshold_pct: float, fmt: str) -> int:
    from gpubench.report.compare import compare as compare_runs
    from gpubench.report.compare import format_comparison

    try:
        result = compare_runs(base, new, threshold_pct)
    except ResultsError as e:
        raise ConfigError(str(e)) from e
    sys.stdout.write(format_comparison(result, fmt) + "\n")
    return result.exit_code()


def resume_command(run_dir: Path, max_memory: int | None, point_timeout_s: float | None) -> str:
    """The command line that continues the sweep in `run_dir` with the same isolation flags."""
    parts = ["python -m gpubench sweep --resume", shlex.quote(str(run_dir))]
    if max_memory is not None:
        parts += ["--max-memory", exact_size(max_memory)]
    if point_timeout_s is not None and point_timeout_s != DEFAULT_POINT_TIMEOUT_S:
        parts += ["--point-timeout", f"{point_timeout_s:g}"]
    return " ".join(parts)


def max_batch(
    point: Point,
    *,
    max_memory: int | None,
    point_timeout_s: float | None,
    start: int,
    ceiling: int,
    probe_steps: int,
    exact: bool,
    budget: Budget,
    time_them: bool,
    as_json: bool,
    target_batch: int | None = None,
    checkpoints: list[str] | None = None,
) -> int:
    """Search the largest batch of `point` that fits under the memory cap and print it; with
    `target_batch` or `checkpoints`, the largest micro-batch per checkpoint mode and the fewest
    accumulation steps for the target (run.accumulation_plan)."""
    from gpubench.config.model_options import decode
    from gpubench.harness.step import unsupported_reason
    from gpubench.run import preflight
    from gpubench.run.worker import WorkerRunner

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

    def search(p: Point) -> maxbatch.MaxBatch:
        return maxbatch.find(
            p,
            cap,
            point_timeout_s,
            start=start,
            ceiling=ceiling,
            probe_steps=probe_steps,
            exact=exact,
            confirm_budget=budget,
            time_budget=budget if time_them else None,
            on_probe=None if as_json else console.probe_line,
        )

    if target_batch is not None or checkpoints is not None:  # issue 25
        modes = checkpoints or (["none", "blocks"] if target_batch is not None else ["none"])
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


def list_all(suites_dir: Path) -> int:
    import torch

    from gpubench.models import describe

    devices = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
    suites = sorted(p.stem for p in suites_dir.glob("*.toml"))
    console.listing(describe(), devices, suites)
    return 0


def show_env() -> int:
    from gpubench.store import env

    print_json(env.capture())
    return 0
