"""What the commands print: the sweep's progress, summary and notices, the verdict, `list`, and
max-batch's probes, answer and accumulation plan (the results table: results_table.py)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpubench.cli import results_table
from gpubench.cli.convergence_table import batch_table, comparisons, points_table
from gpubench.cli.layout import plain_table
from gpubench.config import labels
from gpubench.config.spec import (
    OPTIMIZERS,
    PRECISION_NOTE,
    PRECISIONS,
    Point,
    SweepSpec,
)
from gpubench.probes import load
from gpubench.report import answer
from gpubench.run import maxbatch
from gpubench.science import remeasured
from gpubench.science.verdict import ModelVerdict
from gpubench.store import confirmations, env, pace_record
from gpubench.store.wording import cell, milliseconds, number, plural, printable, seconds, size

if TYPE_CHECKING:  # its search runs workers (torch): printed only after one ran
    from gpubench.run.accumulation_plan import AccumulationPlan

# Markup off: everything printed comes from results, suites, paths or exceptions, where "[...]"
# is text (an allocator's message, a suite named "a[/]b"), never a style to parse.
stderr = Console(stderr=True, markup=False)
stdout = Console(width=None if sys.stdout.isatty() else 160, markup=False)


def say(line: str) -> None:
    """One line on stderr, never wrapped nor coloured."""
    stderr.print(line, soft_wrap=True, highlight=False)


def out(line: str) -> None:
    """One line on stdout, never wrapped nor coloured."""
    stdout.print(line, soft_wrap=True, highlight=False)


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
            console=stderr,
            disable=quiet,
        )
        self.task = self.bar.add_task("measuring", total=None)
        self.measuring = False  # from on_start on: a point is in flight or next

    def on_start(self, total: int, done: int) -> None:
        """The run folder passed its checks: say what runs where, and start the bar."""
        already = f" ({done} measured before)" if done else ""
        changed = f" with {', '.join(self.overridden)}" if self.overridden else ""
        say(
            f"gpubench: suite {self.spec.name!r}{changed}, {plural(total, 'point')}{already} on "
            f"{', '.join(self.spec.resolved_devices())} -> {self.run_dir}"
        )
        reasons = load.busy_reasons(env.read(self.run_dir))
        if reasons:
            say(
                f"gpubench: warning: busy machine as the sweep starts: {'; '.join(reasons)}; "
                "its figures will be marked where other processes shared the CPU"
            )
        self.bar.update(self.task, total=total, completed=done)
        self.bar.start()
        self.measuring = True

    def on_row(self, row: dict[str, Any], i: int, total: int) -> None:
        self.bar.update(self.task, total=total, completed=i, description=_short(row))
        if not stderr.is_terminal and not self.quiet:
            say(f"[{i}/{total}] {_short(row)}")

    def stop(self) -> None:
        self.bar.stop()


def target_run(row: dict[str, Any], i: int, total: int) -> None:
    """A run to the target of `sweep --confirm-target` (issue 51) as it ends: 'target run 3/9:
    mlp/tiny cpu fp32 adamw B=256 lr sqrt seed 1: 0.0974 s to eval_loss 0.15, 127 steps'."""
    what = f"target run {i}/{total}: {labels.label(row, whole=True)} seed {row.get('seed')}"
    reached = row.get("time_to_target_s")
    if row.get("status") != "ok":  # no target recorded: a run refused or failed before it
        say(f"gpubench: {what}: {row.get('status')} ({row.get('error')})")
        return
    target = f"{row.get('target_metric')} {number(float(row['target']))}"
    if reached is None:
        say(f"gpubench: {what}: missed {target}")
    else:
        steps = plural(int(row["steps_to_target"]), "step")
        say(f"gpubench: {what}: {seconds(reached)} to {target}, {steps}")


def launched_row(row: dict[str, Any]) -> None:
    """A row written by rank 0 of a torchrun launch (issue 17)."""
    say(f"gpubench: {_short(row)}")


def stopping(measuring: bool) -> None:
    """The first Ctrl-C's line: once `measuring`, the point in flight is finished first."""
    if not measuring:
        say("gpubench: stopping before the first point (Ctrl-C again stops at once)")
        return
    say(
        "gpubench: stopping after the point in flight is recorded "
        "(Ctrl-C again stops at once, losing that point)"
    )


def stopped(resume_hint: str, early: bool) -> None:
    say(f"gpubench: {'stopped early' if early else 'stopped'}; resume with: {resume_hint}")


def sweep_summary(frame: pd.DataFrame, run_dir: Path, convergence: bool) -> None:
    """The finished sweep's tables (a convergence sweep's with its batch-size analysis), each
    configuration's samples/s the one its verdict quotes (science.remeasured)."""
    if convergence:
        _print_convergence(frame, run_dir)
    else:
        # one figure per configuration: the verdict's re-measured one where it took one
        shown = remeasured.apply(frame, confirmations.partitions(run_dir))
        stdout.print(results_table.summary_table(shown, width=stdout.width))
    stdout.print(f"results: {run_dir}")
    pace = pace_record.of_folder(run_dir)  # issue 53: a pool's speedup, seen
    if pace is not None:
        out(pace.line())
    busy = load.busy_line(env.read(run_dir), frame.to_dict("records"))
    if busy is not None:
        say(f"gpubench: warning: {busy}")


def verdict(
    verdicts: list[ModelVerdict], runs: list[str], nothing: str = "", cpu_energy: str | None = None
) -> None:
    """The verdict per model (`explain`, and the last thing a sweep prints); `nothing`: why
    there is none (report.explain.nothing_concluded); `cpu_energy`: why the CPU rows have no
    energy figure, said once (report.explain.cpu_energy_line; None: nothing to say)."""
    out(printable(f"verdict ({', '.join(runs)}):"))
    if not verdicts:
        out(f"  {nothing or 'no point ran'}: nothing to conclude")
    else:  # the answer at a glance first, the same cells as the report's
        stdout.print(
            plain_table("the answer", answer.HEADERS, answer.rows(verdicts), answer.NUMBERS)
        )
        if cpu_energy:
            out(cpu_energy)
    for v in verdicts:
        for line in v.lines():
            out(printable(line, lines=True))  # a suite's or a folder's name is the user's


def report_path(path: Path) -> None:
    stdout.print(f"report: {path}")


def report_skipped(run_dir: Path) -> None:
    """--no-report's line where the report's path would be: the command that draws it."""
    again = shlex.quote(str(run_dir))
    out(f"report: not drawn (--no-report); draw it with: python -m gpubench report {again}")


def report_failed(run_dir: Path, error: Exception) -> None:
    """One line (a command to copy must not be wrapped: rich wrapped it at 80 columns)."""
    say(
        f"gpubench: warning: the report failed ({type(error).__name__}: {error}); the results "
        f"are kept; retry with: python -m gpubench report {run_dir}"
    )


def sweep_errors(errors: list[dict[str, Any]], failed: list[str], run_dir: Path) -> None:
    """On stderr, after a sweep whose `errors` rows ended `error`: each model of `failed` (every
    point of which did), the first error, the last frames of the first traceback, and where
    every traceback is kept (the `traceback` field of its row)."""
    from gpubench.harness.tracebacks import last_frames
    from gpubench.store.results import RESULTS_FILE

    for model in failed:
        n = sum(r["model"] == model for r in errors)
        which = f"all {n} points" if n > 1 else "the one point"
        say(f"gpubench: error: {which} of {model} ended in error: it measured nothing")
    first = errors[0]
    kind = "error" if failed else "warning"
    points = f"{plural(len(errors), 'point')} ended in error"
    say(f"gpubench: {kind}: {points}; the first, {_point_text(first)}: {first.get('error')}")
    # A worker that died left no traceback: show the first error that has one.
    traced = next((r for r in errors if isinstance(r.get("traceback"), str)), None)
    if traced is not None:
        if traced is not first:
            say(f"gpubench: the first with a traceback, {_point_text(traced)}: {traced['error']}")
        for line in last_frames(traced["traceback"]):
            say(line)
        jsonl = shlex.quote(str(Path(run_dir) / RESULTS_FILE))
        say(
            "gpubench: each error's whole traceback is in the `traceback` field of its row in "
            f"{jsonl}; to print them: jq -r 'select(.traceback) | .traceback' {jsonl}"
        )


def _point_text(row: dict[str, Any]) -> str:
    """A row's point, e.g. 'mlp/small cpu fp32 sgd B=16' (config.labels, whole)."""
    return labels.label(row, whole=True)


def _print_convergence(frame: pd.DataFrame, run_dir: Path) -> None:
    from gpubench.store import batch_analysis_record

    stdout.print(points_table(frame))
    record = batch_analysis_record.read(run_dir)
    groups = list(record.groups) if record is not None else []
    stdout.print(batch_table(groups))
    for line in comparisons(groups):
        out(line)


def _short(row: dict[str, Any]) -> str:
    ms = milliseconds(row["step_time_s"]) if row.get("step_time_s") else row["status"]
    return f"{_point_text(row)}: {ms}"  # a row's threads where set, as the label says them


def listing(models: list[dict[str, Any]], devices: list[str], suites: list[str]) -> None:
    """`gpubench list`: the models with their presets, and the values each axis allows."""
    rows = (
        (
            m["model"],
            m["size"],
            f"{m['parameters']:,}",
            ", ".join(f"{k}={v}" for k, v in m["config"].items()),
        )
        for m in models
    )
    stdout.print(plain_table("models", ("model", "size", "parameters", "config"), rows))
    stdout.print(f"precisions: {', '.join(PRECISIONS)}")
    stdout.print(f"  note: {PRECISION_NOTE}")
    stdout.print(
        "models also: torchvision:NAME, timm:NAME (a torchvision built for your torch: see "
        "the README), hf:MODEL_TYPE (extra hf), package.module:function"
    )
    stdout.print(f"optimizers: {', '.join(OPTIMIZERS)}")
    stdout.print(f"devices here: {', '.join(devices)} (auto = all of them)")
    stdout.print(f"suites: {', '.join(suites)}")


def max_batch_header(point: Point, cap: int | None, chosen: bool) -> None:
    where = point.label(batch=False)
    capped = f"capped at {size(cap)}" if cap is not None else "no cap but the device's own"
    if not chosen and cap is not None:
        capped += " (the memory available now; set --max-memory to choose)"
    say(f"gpubench: largest batch of {where}, memory {capped}")


def probe_line(p: maxbatch.Probe) -> None:
    say(f"  {p.phase:>7} B={p.batch_size}: {p.status} ({seconds(p.seconds)})")


def max_batch_result(result: maxbatch.MaxBatch) -> None:
    stdout.print(probe_table(result))
    if result.stopped:
        stdout.print(f"search stopped early: {result.stopped}")
    stdout.print(result.answer())
    for line in maxbatch.timing_conflicts(result.probes):  # issue 42
        stdout.print(f"warning: {line}")
    searched = len(result.search_probes)
    stdout.print(
        f"probes: {searched} to search ({seconds(result.search_seconds)}), "
        f"{len(result.probes) - searched} to confirm/time"
    )
    if result.best_batch is not None:
        stdout.print(f"throughput-optimal batch: {result.best_batch}")


def accumulation_plan(found: AccumulationPlan) -> None:
    """Per checkpoint mode the largest micro-batch, and for a target effective batch the fewest
    accumulation steps a full measurement fitted (issue 25)."""
    for way in found.ways:
        r = way.search.resolution
        within = "" if r <= 1 else f", within {r} samples"
        largest = f"largest micro-batch that fits: {way.largest_micro_batch}{within}"
        out(f"checkpoint {way.checkpoint}: {largest}")
        for a in way.attempts:
            how = (
                f"{a.status}: {(a.error or '')[:60]}" if a.status not in ("ok", "oom") else a.status
            )
            speed = f", {number(a.samples_per_s)} samples/s" if a.samples_per_s else ""
            peak = f", peak {size(a.memory_bytes)}" if a.memory_bytes else ""
            split = labels.accumulation(a.accumulate, a.micro_batch)
            out(f"  B={found.target_batch} {split}: {how}{speed}{peak}")
    best = found.fewest
    if found.target_batch is not None:
        if best is None or best.answer is None:
            out(f"no way of B={found.target_batch} fitted")
        else:
            a = best.answer
            split = labels.way(a.accumulate, a.micro_batch, best.checkpoint)
            out(f"fewest accumulation steps: B={found.target_batch} {split}")


def probe_table(result: maxbatch.MaxBatch) -> Table:
    rows = (
        (
            p.phase,
            str(p.batch_size),
            # an oom's reason is the allocator's words
            f"{p.status}: {(p.error or '')[:60]}" if not p.fits and p.status != "oom" else p.status,
            cell(p.step_time_s, ".2f", 1e3),
            cell(p.samples_per_s, ",.0f"),
            cell(p.seconds, ".3g"),
        )
        for p in result.probes
    )
    headers = ("phase", "batch", "outcome", "step ms", "samples/s", "seconds")
    return plain_table("max-batch probes", headers, rows, headers[3:] + headers[1:2])
