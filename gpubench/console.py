"""What the commands print: the sweep's progress bar and summary, `list` and `env`."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpubench.spec import OPTIMIZERS, PRECISIONS, Budget, ConfigError, Point, SweepSpec

_err = Console(stderr=True)
_out = Console(width=None if sys.stdout.isatty() else 160)


def sweep(
    spec: SweepSpec,
    out: Path | None,
    quiet: bool = False,
    *,
    resume: bool = False,
    extend: bool = False,
    max_memory: int | None = None,
    point_timeout_s: float | None = None,
) -> int:
    from gpubench.interrupt import GracefulStop
    from gpubench.sweep import default_run_dir, run_sweep

    run_dir = out if out is not None else default_run_dir()
    hint = resume_command(run_dir, max_memory, point_timeout_s)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_err,
        disable=quiet,
    )
    task = progress.add_task("measuring", total=None)

    def on_start(total: int, done: int) -> None:  # the run folder passed its checks
        already = f" ({done} measured before)" if done else ""
        _err.print(
            f"gpubench: suite {spec.name!r}, {total} points{already} on "
            f"{', '.join(spec.resolved_devices())} -> {run_dir}",
            soft_wrap=True,
        )
        progress.update(task, total=total, completed=done)
        progress.start()

    def on_row(row: dict[str, Any], i: int, total: int) -> None:
        progress.update(task, completed=i, description=_short(row))
        if not _err.is_terminal and not quiet:
            _err.print(f"[{i}/{total}] {_short(row)}")

    def on_first_ctrl_c() -> None:
        _err.print(
            "gpubench: stopping after the point in flight is recorded "
            "(Ctrl-C again stops at once, losing that point)",
            soft_wrap=True,
        )

    try:
        with GracefulStop(on_first_ctrl_c) as stop:
            frame = run_sweep(
                spec,
                run_dir,
                on_row=on_row,
                resume=resume,
                extend=extend,
                max_memory=max_memory,
                point_timeout_s=point_timeout_s,
                should_stop=lambda: stop.requested,
                on_start=on_start,
            )
    except KeyboardInterrupt:
        progress.stop()
        _err.print(f"gpubench: stopped; resume with: {hint}", soft_wrap=True)
        return 130
    finally:
        progress.stop()
    if spec.mode == "convergence":
        _print_convergence(frame, run_dir)
    else:
        _out.print(summary_table(frame))
    _out.print(f"results: {run_dir}")
    _render_report(run_dir)
    if stop.requested:
        _err.print(f"gpubench: stopped early; resume with: {hint}", soft_wrap=True)
        return 130
    return 0


def _render_report(run_dir: Path) -> None:
    """The sweep's report. Its rows are already on disk, so a failure here costs only the
    report: it is printed with the command that retries it, and the sweep still succeeds."""
    from gpubench.report import build_report

    try:
        _out.print(f"report: {build_report([run_dir])}")
    except Exception as e:
        _err.print(
            f"gpubench: warning: the report failed ({type(e).__name__}: {e}); the results are "
            f"kept; retry with: python -m gpubench report {run_dir}"
        )


def report(dirs: list[Path], out: Path | None) -> int:
    from gpubench.report import build_report
    from gpubench.results import ResultsError

    try:
        path = build_report(dirs, out)
    except ResultsError as e:
        raise ConfigError(str(e)) from e
    _out.print(f"report: {path}")
    return 0


def compare(base: Path, new: Path, threshold_pct: float, fmt: str) -> int:
    from gpubench.report.compare import compare as compare_runs
    from gpubench.report.compare import format_comparison
    from gpubench.results import ResultsError

    try:
        result = compare_runs(base, new, threshold_pct)
    except ResultsError as e:
        raise ConfigError(str(e)) from e
    sys.stdout.write(format_comparison(result, fmt) + "\n")
    return result.exit_code()


def _print_convergence(frame: pd.DataFrame, run_dir: Path) -> None:
    from gpubench.batch_science import FILE
    from gpubench.convergence_table import batch_table, comparisons, points_table

    _out.print(points_table(frame))
    groups = json.loads((Path(run_dir) / FILE).read_text(encoding="utf-8"))["groups"]
    _out.print(batch_table(groups))
    for line in comparisons(groups):
        _out.print(line, highlight=False)


def resume_command(run_dir: Path, max_memory: int | None, point_timeout_s: float | None) -> str:
    """The command line that continues the sweep in `run_dir` with the same isolation flags."""
    from gpubench.memory_limit import exact_size
    from gpubench.sweep import DEFAULT_POINT_TIMEOUT_S

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
    budget: Budget,
    time_them: bool,
    as_json: bool,
) -> int:
    from gpubench import maxbatch
    from gpubench.measure import unsupported_reason
    from gpubench.memory_limit import format_size

    reason = unsupported_reason(point)
    if reason is not None:
        raise ConfigError(f"{point.label().removesuffix(f' B={point.batch_size}')}: {reason}")

    cap = max_memory if max_memory is not None else maxbatch.default_cap(point.device)
    where = f"{point.model}/{point.model_size} {point.device} {point.precision} {point.optimizer}"
    capped = f"capped at {format_size(cap)}" if cap is not None else "no cap but the device's own"
    if max_memory is None and cap is not None:
        capped += " (the memory available now; set --max-memory to choose)"
    _err.print(f"gpubench: largest batch of {where}, memory {capped}")

    def on_probe(p: maxbatch.Probe) -> None:
        _err.print(f"  {p.phase:>7} B={p.batch_size}: {p.status} ({p.seconds:.1f} s)")

    result = maxbatch.find(
        point,
        cap,
        point_timeout_s,
        start=start,
        ceiling=ceiling,
        probe_steps=probe_steps,
        confirm_budget=budget,
        time_budget=budget if time_them else None,
        on_probe=None if as_json else on_probe,
    )
    if as_json:
        json.dump(result.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    _out.print(probe_table(result))
    if result.stopped:
        _out.print(f"search stopped early: {result.stopped}")
    if result.largest == 0:
        _out.print("not even a batch of one fits")
    else:
        more = " (the --ceiling; more may fit)" if result.ceiling_reached else ""
        _out.print(f"largest batch that fits: {result.largest}{more}")
    searched = len(result.search_probes)
    _out.print(f"probes: {searched} to search, {len(result.probes) - searched} to confirm/time")
    if result.best_batch is not None:
        _out.print(f"throughput-optimal batch: {result.best_batch}")
    return 0


def probe_table(result: Any) -> Table:
    table = Table(title="max-batch probes")
    for col in ("phase", "batch", "outcome", "step ms", "samples/s", "seconds"):
        table.add_column(col, justify="left" if col in ("phase", "outcome") else "right")
    for p in result.probes:
        failed = not p.fits and p.status != "oom"  # an oom's reason is the allocator's words
        outcome = f"{p.status}: {escape((p.error or '')[:60])}" if failed else p.status
        table.add_row(
            p.phase,
            str(p.batch_size),
            outcome,
            _fmt(p.step_time_s * 1e3 if p.step_time_s else None, ".2f"),
            _fmt(p.samples_per_s, ",.0f"),
            f"{p.seconds:.1f}",
        )
    return table


def _short(row: dict[str, Any]) -> str:
    ms = f"{row['step_time_s'] * 1e3:.2f} ms" if row.get("step_time_s") else row["status"]
    return (
        f"{row['model']} {row['device']} {row['precision']} {row['optimizer']} "
        f"B={row['batch_size']}: {ms}"
    )


def _fmt(value: Any, spec: str) -> str:
    return "" if value is None or pd.isna(value) else format(value, spec)


def _options(row: dict[str, Any]) -> str:
    """The speed options that differ from the defaults, e.g. 'compile, graph'."""
    opts = []
    if row.get("compile") == "compile":
        opts.append("compile")
    if row.get("channels_last") is True:
        opts.append("channels_last")
    if row.get("cuda_graph") is True:
        opts.append("graph")
    if row.get("data") == "host":
        opts.append("host data")
    return ", ".join(opts)


def summary_table(frame: pd.DataFrame) -> Table:
    table = Table(title="gpubench results")
    for col in (
        "model",
        "device",
        "precision",
        "optimizer",
        "options",
        "batch",
        "status",
        "step ms",
        "±CI",
        "samples/s",
        "loss first→last",
    ):
        table.add_column(
            col, justify="right" if col in ("batch", "step ms", "samples/s") else "left"
        )
    for row in frame.to_dict("records"):
        step = _fmt(row["step_time_s"] * 1e3 if row["step_time_s"] else None, ".2f")
        ci = _fmt(row["step_time_ci_rel"] * 100 if row["step_time_ci_rel"] else None, ".1f")
        loss = (
            f"{row['loss_first']:.3f}→{row['loss_last']:.3f}"
            if row["loss_first"] is not None and not pd.isna(row["loss_first"])
            else ""
        )
        status = row["status"] + (" (noisy)" if row.get("noisy") is True else "")
        if row["status"] != "ok" and row.get("error"):
            status += f": {escape(row['error'][:60])}"  # an error's [brackets] are not markup
        table.add_row(
            f"{row['model']}/{row['model_size']}",
            row["device"],
            row["precision"],
            row["optimizer"],
            _options(row),
            str(row["batch_size"]),
            status,
            step,
            f"{ci}%" if ci else "",
            _fmt(row["samples_per_s"], ",.0f"),
            loss,
        )
    return table


def list_all(suites_dir: Path) -> int:
    import torch

    from gpubench.models import describe

    table = Table(title="models")
    for col in ("model", "size", "parameters", "config"):
        table.add_column(col)
    for m in describe():
        cfg = ", ".join(f"{k}={v}" for k, v in m["config"].items())
        table.add_row(m["model"], m["size"], f"{m['parameters']:,}", cfg)
    _out.print(table)
    devices = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
    _out.print(f"precisions: {', '.join(PRECISIONS)}")
    _out.print(f"optimizers: {', '.join(OPTIMIZERS)}")
    _out.print(f"devices here: {', '.join(devices)} (auto = all of them)")
    _out.print(f"suites: {', '.join(sorted(p.stem for p in suites_dir.glob('*.toml')))}")
    return 0


def show_env() -> int:
    from gpubench import env

    json.dump(env.capture(), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return 0
