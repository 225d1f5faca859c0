"""What the commands print: the sweep's progress bar and summary, `list` and `env`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpubench.spec import OPTIMIZERS, PRECISIONS, ConfigError, SweepSpec

_err = Console(stderr=True)
_out = Console(width=None if sys.stdout.isatty() else 160)


def sweep(spec: SweepSpec, out: Path | None, quiet: bool = False) -> int:
    from gpubench.sweep import default_run_dir, run_sweep

    run_dir = out if out is not None else default_run_dir()
    n = len(spec.points())
    _err.print(
        f"gpubench: suite {spec.name!r}, {n} points on "
        f"{', '.join(spec.resolved_devices())} -> {run_dir}"
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_err,
        disable=quiet,
    ) as progress:
        task = progress.add_task("measuring", total=n)

        def on_row(row: dict[str, Any], i: int, total: int) -> None:
            progress.update(task, advance=1, description=_short(row))
            if not _err.is_terminal and not quiet:
                _err.print(f"[{i}/{total}] {_short(row)}")

        frame = run_sweep(spec, run_dir, on_row=on_row)
    if spec.mode == "convergence":
        _print_convergence(frame, run_dir)
    else:
        _out.print(summary_table(frame))
    _out.print(f"results: {run_dir}")
    _render_report(run_dir)
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
            status += f": {row['error'][:60]}"
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
