"""What the commands print: the sweep's progress, summary and notices, max-batch's probes, and
`list`. Printing only: which points run is decided elsewhere (commands.py, run/)."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpubench.cli import layout
from gpubench.cli.cells import fmt
from gpubench.cli.convergence_table import batch_table, comparisons, points_table
from gpubench.cli.layout import Column
from gpubench.config.precision import PRECISION_NOTE
from gpubench.config.spec import OPTIMIZERS, PRECISIONS, Point, SweepSpec, model_label
from gpubench.data.synthetic import DISTINCT_BATCHES
from gpubench.harness.timing import min_samples_for_ci
from gpubench.probes import load
from gpubench.run import maxbatch
from gpubench.run.accumulation_plan import AccumulationPlan
from gpubench.run.memory_cap import format_size
from gpubench.science import scaling
from gpubench.science.verdict import ModelVerdict, speed_options
from gpubench.store.wording import plural

# Markup off: everything printed comes from results, suites, paths or exceptions, where "[...]"
# is text (an allocator's message, a suite named "a[/]b"), never a style to parse.
_err = Console(stderr=True, markup=False)
_out = Console(width=None if sys.stdout.isatty() else 160, markup=False)


class SweepProgress:
    """The sweep's progress bar on stderr (a line per point where stderr is no terminal)."""

    def __init__(
        self, spec: SweepSpec, run_dir: Path, quiet: bool, overridden: Sequence[str] = ()
    ) -> None:
        self.spec, self.run_dir, self.quiet = spec, run_dir, quiet
        self.overridden = tuple(overridden)  # the flags that changed the named suite
        self.bar = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=_err,
            disable=quiet,
        )
        self.task = self.bar.add_task("measuring", total=None)

    def on_start(self, total: int, done: int) -> None:
        """The run folder passed its checks: say what runs where, and start the bar."""
        already = f" ({done} measured before)" if done else ""
        changed = f" with {', '.join(self.overridden)}" if self.overridden else ""
        _err.print(
            f"gpubench: suite {self.spec.name!r}{changed}, {plural(total, 'point')}{already} on "
            f"{', '.join(self.spec.resolved_devices())} -> {self.run_dir}",
            soft_wrap=True,
            highlight=False,
        )
        reasons = load.busy_reasons(read_env(self.run_dir))
        if reasons:
            _err.print(
                f"gpubench: warning: busy machine as the sweep starts: {'; '.join(reasons)}; "
                "its figures will be marked where other processes shared the CPU",
                soft_wrap=True,
                highlight=False,
            )
        self.bar.update(self.task, total=total, completed=done)
        self.bar.start()

    def on_row(self, row: dict[str, Any], i: int, total: int) -> None:
        self.bar.update(self.task, total=total, completed=i, description=_short(row))
        if not _err.is_terminal and not self.quiet:
            _err.print(f"[{i}/{total}] {_short(row)}")

    def stop(self) -> None:
        self.bar.stop()


def read_env(run_dir: Path) -> dict[str, Any]:
    """The run folder's env.json, or {} where it has none yet."""
    path = Path(run_dir) / "env.json"
    if not path.is_file():
        return {}
    env: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return env


def launched_row(row: dict[str, Any]) -> None:
    """A row written by rank 0 of a torchrun launch (issue 17)."""
    _err.print(f"gpubench: {_short(row)}", soft_wrap=True)


def stopping_after_point() -> None:
    _err.print(
        "gpubench: stopping after the point in flight is recorded "
        "(Ctrl-C again stops at once, losing that point)",
        soft_wrap=True,
    )


def stopped(resume_hint: str, early: bool) -> None:
    how = "stopped early" if early else "stopped"
    _err.print(f"gpubench: {how}; resume with: {resume_hint}", soft_wrap=True)


def sweep_summary(frame: pd.DataFrame, run_dir: Path, convergence: bool) -> None:
    """The finished sweep's tables (a convergence sweep's with its batch-size analysis)."""
    if convergence:
        _print_convergence(frame, run_dir)
    else:
        _out.print(summary_table(frame, width=_out.width))
    _out.print(f"results: {run_dir}")
    busy(load.busy_line(read_env(run_dir), frame.to_dict("records")))


def verdict(verdicts: list[ModelVerdict], runs: list[str]) -> None:
    """The verdict per model (`explain`, and the last thing a sweep prints)."""
    _out.print(f"verdict ({', '.join(runs)}):", highlight=False)
    if not verdicts:
        _out.print("  no point ran: nothing to conclude", highlight=False)
    for v in verdicts:
        for line in v.lines():
            _out.print(escape(line), highlight=False, soft_wrap=True)


def report_path(path: Path) -> None:
    _out.print(f"report: {path}")


def report_failed(run_dir: Path, error: Exception) -> None:
    _err.print(
        f"gpubench: warning: the report failed ({type(error).__name__}: {error}); the results "
        f"are kept; retry with: python -m gpubench report {run_dir}"
    )


def sweep_errors(errors: list[dict[str, Any]], failed: list[str], run_dir: Path) -> None:
    """After a sweep whose `errors` rows (in the order measured) ended `error`: each model of
    `failed` every point of which did, the first error, the last frames of the first traceback
    (a worker that died has none), and where every traceback is kept (results.jsonl's
    `traceback` field), on stderr."""
    from gpubench.harness.tracebacks import last_frames

    def say(line: str) -> None:
        _err.print(line, soft_wrap=True, highlight=False)

    for model in failed:
        n = sum(r["model"] == model for r in errors)
        which = f"all {n} points" if n > 1 else "the one point"
        say(f"gpubench: error: {which} of {model} ended in error: it measured nothing")
    first = errors[0]
    kind = "error" if failed else "warning"
    points = f"{len(errors)} point{'s' if len(errors) != 1 else ''} ended in error"
    say(f"gpubench: {kind}: {points}; the first, {_point_text(first)}: {first.get('error')}")
    # A worker that died left no traceback: show the first error that has one.
    traced = next((r for r in errors if isinstance(r.get("traceback"), str)), None)
    if traced is not None:
        if traced is not first:
            say(f"gpubench: the first with a traceback, {_point_text(traced)}: {traced['error']}")
        for line in last_frames(traced["traceback"]):
            say(line)
        jsonl = shlex.quote(str(Path(run_dir) / "results.jsonl"))
        say(
            "gpubench: each error's whole traceback is in the `traceback` field of its row in "
            f"{jsonl}; to print them: jq -r 'select(.traceback) | .traceback' {jsonl}"
        )


def _point_text(row: dict[str, Any]) -> str:
    """A row's point, e.g. 'mlp/small cpu fp32 sgd B=16'."""
    return (
        f"{model_label(row['model'], row.get('model_size'))} {row['device']} "
        f"{row['precision']} {row['optimizer']} B={row['batch_size']}"
    )


def _print_convergence(frame: pd.DataFrame, run_dir: Path) -> None:
    from gpubench.science.batch_analysis import FILE

    _out.print(points_table(frame))
    groups = json.loads((Path(run_dir) / FILE).read_text(encoding="utf-8"))["groups"]
    _out.print(batch_table(groups))
    for line in comparisons(groups):
        _out.print(line, highlight=False)


def max_batch_header(point: Point, cap: int | None, chosen: bool) -> None:
    where = point.label().removesuffix(f" B={point.batch_size}")
    capped = f"capped at {format_size(cap)}" if cap is not None else "no cap but the device's own"
    if not chosen and cap is not None:
        capped += " (the memory available now; set --max-memory to choose)"
    _err.print(f"gpubench: largest batch of {where}, memory {capped}")


def probe_line(p: maxbatch.Probe) -> None:
    _err.print(f"  {p.phase:>7} B={p.batch_size}: {p.status} ({p.seconds:.1f} s)")


def max_batch_result(result: maxbatch.MaxBatch) -> None:
    _out.print(probe_table(result))
    if result.stopped:
        _out.print(f"search stopped early: {result.stopped}")
    if result.largest == 0:
        _out.print("not even a batch of one fits")
    else:
        more = " (the --ceiling; more may fit)" if result.ceiling_reached else ""
        within = "" if result.resolution <= 1 else f", within {result.resolution} samples"
        if result.smallest_failed is not None:
            within += f" ({result.smallest_failed} did not fit)"
        _out.print(f"largest batch that fits: {result.largest}{more}{within}")
    searched = len(result.search_probes)
    _out.print(
        f"probes: {searched} to search ({result.search_seconds:.1f} s), "
        f"{len(result.probes) - searched} to confirm/time"
    )
    if result.best_batch is not None:
        _out.print(f"throughput-optimal batch: {result.best_batch}")


def accumulation_plan(found: AccumulationPlan) -> None:
    """Per checkpoint mode the largest micro-batch, and for a target effective batch the fewest
    accumulation steps a full measurement fitted (issue 25)."""
    for way in found.ways:
        r = way.search.resolution
        within = "" if r <= 1 else f", within {r} samples"
        _out.print(
            f"checkpoint {way.checkpoint}: largest micro-batch that fits: "
            f"{way.largest_micro_batch}{within}",
            highlight=False,
        )
        for a in way.attempts:
            how = (
                f"{a.status}: {(a.error or '')[:60]}" if a.status not in ("ok", "oom") else a.status
            )
            speed = f", {a.samples_per_s:,.0f} samples/s" if a.samples_per_s else ""
            peak = f", peak {format_size(a.memory_bytes)}" if a.memory_bytes else ""
            _out.print(
                f"  B={found.target_batch} as {a.accumulate} x {a.micro_batch}: {how}{speed}{peak}",
                highlight=False,
            )
    best = found.fewest
    if found.target_batch is not None:
        if best is None or best.answer is None:
            _out.print(f"no way of B={found.target_batch} fitted", highlight=False)
        else:
            k, micro = best.answer.accumulate, best.answer.micro_batch
            _out.print(
                f"fewest accumulation steps for B={found.target_batch}: {k} x {micro} "
                f"(checkpoint {best.checkpoint})",
                highlight=False,
            )


def probe_table(result: maxbatch.MaxBatch) -> Table:
    table = Table(title="max-batch probes")
    for col in ("phase", "batch", "outcome", "step ms", "samples/s", "seconds"):
        table.add_column(col, justify="left" if col in ("phase", "outcome") else "right")
    for p in result.probes:
        failed = not p.fits and p.status != "oom"  # an oom's reason is the allocator's words
        outcome = f"{p.status}: {(p.error or '')[:60]}" if failed else p.status
        table.add_row(
            p.phase,
            str(p.batch_size),
            outcome,
            fmt(p.step_time_s * 1e3 if p.step_time_s else None, ".2f"),
            fmt(p.samples_per_s, ",.0f"),
            f"{p.seconds:.1f}",
        )
    return table


def _short(row: dict[str, Any]) -> str:
    ms = f"{row['step_time_s'] * 1e3:.2f} ms" if row.get("step_time_s") else row["status"]
    threads = f" threads={row['threads']}" if pd.notna(row.get("threads")) else ""
    return (
        f"{model_label(row['model'], row.get('model_size'))} {row['device']} "
        f"{row['precision']} {row['optimizer']} B={row['batch_size']}{threads}: {ms}"
    )


def _options(row: dict[str, Any]) -> str:
    """The settings beyond the defaults, e.g. 'compiled, CUDA graph, threads=1': the speed
    options as the report and the verdict name them, then threads and the parallel layout."""
    opts = speed_options(row)
    if pd.notna(row.get("threads")):
        opts.append(f"threads={int(row['threads'])}")
    if pd.notna(row.get("parallel")) and row.get("parallel") != "none":  # e.g. "ddp x2 weak"
        scaling = row.get("scaling")  # None at one process: the baseline of weak and strong
        nodes = row.get("nodes")
        opts.append(
            f"{row['parallel']} x{row.get('nproc')}"
            + (f" on {int(nodes)} nodes" if pd.notna(nodes) and nodes != 1 else "")
            + (f" {scaling}" if pd.notna(scaling) else "")
        )
    if pd.notna(row.get("accumulate")) and row["accumulate"] != 1:  # issue 25
        micro = row.get("micro_batch_size")
        of = f" x {int(micro)}" if pd.notna(micro) else ""
        opts.append(f"accumulate {int(row['accumulate'])}{of}")
    if pd.notna(row.get("checkpoint")) and row["checkpoint"] != "none":
        opts.append(f"checkpoint {row['checkpoint']}")
    return ", ".join(opts)


def model_cell(row: dict[str, Any]) -> str:
    """'mlp/small', or a user's model as 'module:function' with its Workload's own name."""
    label = model_label(row["model"], row.get("model_size"))
    name = row.get("workload")
    if ":" in row["model"] and pd.notna(name) and str(name) not in label:
        label += f" ({name})"
    return label


def _ci_cell(row: dict[str, Any]) -> str:
    """The CI's half-width in percent; where too few steps were measured to have one, says so."""
    ci = row["step_time_ci_rel"]
    if pd.notna(ci):
        return f"{ci * 100:.1f}%"
    n, least = row.get("steps_measured"), min_samples_for_ci()
    if n is None or pd.isna(n) or row["status"] != "ok":
        return ""
    return f"n<{least}" if n < least else ""


def _status_cell(row: dict[str, Any]) -> str:
    marks = [m for m in ("noisy", "busy") if row.get(m) is True]
    status = row["status"] + (f" ({', '.join(marks)})" if marks else "")
    if row["status"] != "ok" and row.get("error"):
        status += f": {row['error'][:60]}"
    return status


_LOSS = "synthetic loss first→last"
_LOSS_CAPTION = (
    f"{_LOSS}: the training loss at the first and last step, on {DISTINCT_BATCHES} random "
    "batches cycled, which a model memorises (so it can fall to 0.000): it shows the steps "
    "train, not how well the model learns; a convergence run measures that"
)


# The columns the results table gives up first where the terminal is narrow (cli.layout.fit):
# the synthetic loss (a check that the steps train), then samples/s (batch over step time),
# then a parallel point's scaling efficiency, then the CI; identity, status and step time
# always stay.
DROPPED_FIRST = (_LOSS, "samples/s", "efficiency", "±CI")


def summary_table(frame: pd.DataFrame, width: int | None = None) -> Table:
    """One line per point, fitted to `width` terminal cells (None: every column) by
    cli.layout.fit: short headers, values shared by every row said in the title, then
    DROPPED_FIRST, in order; names are never cut. A column empty in every row (the speed
    options on a plain CPU sweep, say) is left out."""
    records = frame.to_dict("records")
    # A parallel row's efficiency is written as it is measured; one whose baseline came later
    # (a resumed or merged run) gets it here, as the report does.
    scaling.fill_efficiency(records)
    status = tuple(_status_cell(r) for r in records)
    options = tuple(_options(r) for r in records)
    columns = [
        Column("model", tuple(model_cell(r) for r in records)),
        Column("device", tuple(str(r["device"]) for r in records), constant_to_title=True),
        Column("precision", tuple(r["precision"] for r in records), "prec", False, True),
        Column("optimizer", tuple(r["optimizer"] for r in records), "optim", False, True),
        Column(
            "options",
            options,
            constant_to_title=True,
            wraps=True,
            least=max((cell_len(o) for s in options for o in s.split(", ")), default=0),
        ),
        Column("batch", tuple(str(r["batch_size"]) for r in records), right=True),
        Column(
            "status",
            status,
            wraps=True,
            least=_least(status),
        ),
        Column("step ms", tuple(_step_ms(r) for r in records), right=True),
        Column("±CI", tuple(_ci_cell(r) for r in records), right=True),
        Column("samples/s", tuple(fmt(r["samples_per_s"], ",.0f") for r in records), right=True),
        Column("efficiency", tuple(_efficiency_cell(r) for r in records), "eff", right=True),
        Column(_LOSS, tuple(_loss_cell(r) for r in records), "loss"),
    ]
    shown = [c for i, c in enumerate(columns) if i < 4 or any(c.cells)]
    fitted = layout.fit(shown, width, DROPPED_FIRST)
    loss = [c.label(fitted.short) for c in fitted.columns if c.header == _LOSS]
    caption = loss[0] + _LOSS_CAPTION.removeprefix(_LOSS) if loss else None
    return layout.table(fitted, "gpubench results", caption)


def _efficiency_cell(row: dict[str, Any]) -> str:
    """A parallel point's scaling efficiency in percent (science.scaling), 'noisy' where its
    point or its baseline is; empty for a single-process point or one without a baseline."""
    value = row.get("scaling_efficiency")
    if value is None or pd.isna(value):
        return ""
    noisy = row.get("scaling_efficiency_noisy")
    return f"{value * 100:.0f}%" + (" noisy" if noisy is not None and noisy == 1 else "")


def _least(status: tuple[str, ...]) -> int:
    """The status column's least width: a status with its marks ('ok (noisy, busy)') on one
    line, and an error's words unbroken up to 20 cells (a longer one, a path say, folds)."""
    heads = (cell_len(s.split(": ")[0]) for s in status)
    words = (min(cell_len(w), 20) for s in status for w in s.split())
    return max([*heads, *words, 0])


def _step_ms(row: dict[str, Any]) -> str:
    return fmt(row["step_time_s"] * 1e3 if row["step_time_s"] else None, ".2f")


def _loss_cell(row: dict[str, Any]) -> str:
    if pd.notna(row["loss_first"]) and pd.notna(row["loss_last"]):
        return f"{row['loss_first']:.3f}→{row['loss_last']:.3f}"
    return ""


def busy(line: str | None) -> None:
    """The busy-machine line (probes.load.busy_line), where there is one."""
    if line is not None:
        _err.print(f"gpubench: warning: {line}", soft_wrap=True, highlight=False)


def listing(models: list[dict[str, Any]], devices: list[str], suites: list[str]) -> None:
    """`gpubench list`: the models with their presets, and the values each axis allows."""
    table = Table(title="models")
    for col in ("model", "size", "parameters", "config"):
        table.add_column(col)
    for m in models:
        cfg = ", ".join(f"{k}={v}" for k, v in m["config"].items())
        table.add_row(m["model"], m["size"], f"{m['parameters']:,}", cfg)
    _out.print(table)
    _out.print(f"precisions: {', '.join(PRECISIONS)}")
    _out.print(f"  note: {PRECISION_NOTE}")
    _out.print(
        "models also: torchvision:NAME, timm:NAME (a torchvision built for your torch: see "
        "the README), hf:MODEL_TYPE (extra hf), package.module:function"
    )
    _out.print(f"optimizers: {', '.join(OPTIMIZERS)}")
    _out.print(f"devices here: {', '.join(devices)} (auto = all of them)")
    _out.print(f"suites: {', '.join(suites)}")
