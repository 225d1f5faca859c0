"""Build the report of one or more run folders: report.html plus its charts in plots/."""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import matplotlib
import pandas as pd

from gpubench.probes import load
from gpubench.report import analysis as A
from gpubench.report import (
    chart_record,
    effective_batch,
    efficiency,
    figure,
    goodput_chart,
    learning,
    plots,
    search_speed,
    search_target,
    tables,
    why_plots,
)
from gpubench.report import html as H
from gpubench.report import scaling as parallel_report
from gpubench.report import series as S
from gpubench.report.explain import cpu_energy_line, run_frame, run_verdicts
from gpubench.report.figure import Chart
from gpubench.report.runs import Run, capacities, load_runs
from gpubench.report.verdict_section import verdict_section
from gpubench.science.verdict import ModelVerdict
from gpubench.store import target_record, tune_record
from gpubench.store.results import replace_durably
from gpubench.store.typed_json import RecordError
from gpubench.store.wording import plural

# Processes that draw the charts: each chart is an independent matplotlib rendering (a third
# to half a second of one core on a 2-core CPU), and drawing is most of a report's time.
CHART_PROCESSES = 2

T = TypeVar("T")


def report_path(dirs: Sequence[str | Path], out: str | Path | None) -> Path:
    """Where the report goes: `out` if it names an .html file, `out`/report.html if a folder;
    by default DIR/report.html for one run, <parent of the first>/report/report.html for more."""
    if out is not None:
        out = Path(out)
        return out if out.suffix.lower() in (".html", ".htm") else out / "report.html"
    first = Path(dirs[0])
    if len(dirs) == 1:
        return first / "report.html"
    return first.resolve().parent / "report" / "report.html"


def build_report(dirs: Sequence[str | Path], out: str | Path | None = None) -> Path:
    """Read the run folders `dirs`, draw every chart their data supports, write the page, and
    return its path. Charts are PNGs in plots/ beside the page."""
    runs = load_runs(dirs)
    path = report_path(dirs, out)
    plots_dir = path.parent / "plots"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Names come from results files: a '$' in one must print as itself, not start mathtext.
    with matplotlib.rc_context({"text.parse_math": False}):
        return _build(runs, path, plots_dir)


def _build(runs: Sequence[Run], path: Path, plots_dir: Path) -> Path:
    frame = run_frame(runs)  # one figure per configuration: the re-measured one where any
    capacity = capacities(runs)  # per (run, device name): each row's own machine (issue 23)
    threads = {r.name: r.cpu_threads() for r in runs}
    speedups = A.speedup_table(frame, threads)
    # The page opens with the answer, then what it stands on (suite, commit, contended and noisy
    # points: issue 21); the long tables come after the charts (issue 15).
    verdicts = run_verdicts(runs, frame)
    # issue 41: the answer at a glance and the verdict's bullets first, the summary table right
    # after them, then what the answer stands on
    said = verdict_section(verdicts, cpu_energy_line(runs, frame))
    sections = [header(runs), said, tables.summary(frame, capacity)]
    sections += standing_notes(runs)
    # What the page shows between the verdict and the tables, in order: a chart (None where
    # its data is absent, with the reason to list) or a section of HTML. Each is made by a job
    # that draws its PNGs; the jobs run in parallel (made_in_parallel), their output in order.
    jobs: list[tuple[Callable[[], Chart | str | None], str]] = []

    def draw(make: Callable[[], Chart | None], why_absent: str) -> None:
        jobs.append((make, why_absent))

    def section(make: Callable[[], str]) -> None:
        jobs.append((make, ""))

    # The charts lead with what the runs varied (issue 28): a run that swept the ways of one
    # effective batch opens with them, and charts against a batch size that no series varied
    # (a column of dots each) come after the others.
    section(lambda: effective_batch.section(frame, plots_dir))  # issue 25: '' if none

    def against_batch() -> None:
        draw(lambda: plots.throughput(frame, plots_dir), "Throughput: no point ran successfully.")
        draw(lambda: plots.step_time(frame, plots_dir), "Step time: no point ran successfully.")

    def memory() -> None:
        draw(
            lambda: plots.memory(frame, plots_dir, capacity),
            "Memory: no memory column was measured in these runs.",
        )

    batch_varies = _batch_varies(frame)
    if batch_varies:
        against_batch()
        draw(  # issue 51: beside throughput
            lambda: goodput_chart.predicted_time(verdicts, plots_dir),
            "Fastest to target (predicted): no model has a B_noise measured on real data.",
        )
    draw(
        lambda: why_plots.breakdown(frame, plots_dir),
        "Step-time breakdown: no point was profiled (profiling off, or runs made before it).",
    )
    draw(
        lambda: why_plots.roofline(frame, plots_dir),
        "Roofline: no point has FLOPs, minimum bytes and measured roofs.",
    )
    if batch_varies:
        memory()
    section(lambda: _speedup(frame, speedups, plots_dir))
    section(lambda: parallel_report.section(frame, plots_dir))  # issue 17: '' if none
    # issue 24: '' without tune.json; its answer is the verdict's (issue 29)
    section(lambda: search_section(runs, plots_dir, verdicts))
    if not batch_varies:
        against_batch()
        memory()
    draw(lambda: plots.compute(frame, plots_dir), "Compute: no TFLOP/s or MFU was measured.")
    draw(
        lambda: plots.energy(frame, plots_dir),
        "Energy: no energy figure (no NVML or RAPL reading, no --cpu-watts) in these rows.",
    )
    draw(  # issue 32: samples per joule and per dollar
        lambda: efficiency.efficiency(frame, plots_dir),
        "Energy and cost efficiency: no energy figure in these rows.",
    )
    draw(
        lambda: learning.loss_curves(frame, plots_dir),
        "Loss curves: no row carries a loss curve (only convergence runs record one).",
    )
    draw(
        lambda: learning.time_to_target(frame, runs, plots_dir),
        "Time to target: no row reached a target (only convergence runs set one).",
    )
    missing: list[str] = []
    made = made_in_parallel([_saving(make) for make, _ in jobs], CHART_PROCESSES)
    # a chart an earlier report drew here and this one does not must not linger; nothing else
    # in plots/ is touched
    chart_record.replace(plots_dir, [name for _, saved in made for name in saved])
    for (value, _), (_, why_absent) in zip(made, jobs, strict=True):
        if value is None:
            missing.append(why_absent)
        else:
            sections.append(value if isinstance(value, str) else H.chart(value))
    if missing:
        sections.append("<h2>Charts not drawn</h2>\n" + H.bullets(missing))
    sections.append(tables.failures(frame))
    sections.append(tables.all_rows(frame))
    sections.append(H.runs_section(runs))
    sections.append(H.environment_section(runs))
    title = "gpubench report: " + ", ".join(r.name for r in runs)
    replace_durably(path, H.page(title, sections))  # whole or not at all; a link not followed
    return path


def search_section(
    runs: Sequence[Run], plots_dir: Path, verdicts: Sequence[ModelVerdict] = ()
) -> str:
    """The "search" section of the runs that hold a search's file, tune.json or tune_target.json
    (report.search_speed, report.search_target; '' where none does); its charts are
    plots/search*.png. With a single run the speed search names its answer as `verdicts` (the
    Verdict section's) do."""
    found = list(verdicts) if len(runs) == 1 else []  # several runs' verdicts span them all
    parts: list[str] = []
    for i, r in enumerate(runs):
        suffix = "" if len(runs) == 1 else f"_{i + 1}"
        if (r.path / tune_record.FILE).is_file():
            try:
                speed = tune_record.read(r.path)
            except RecordError as e:
                parts.append(H.note(f"Run {r.name}: {tune_record.FILE} cannot be read ({e})."))
            else:
                file = f"search{suffix}.png"
                parts.append(search_speed.speed_section(r.name, speed, plots_dir, file, found))
        if (r.path / target_record.FILE).is_file():
            try:
                target = target_record.read(r.path)
            except RecordError as e:
                parts.append(H.note(f"Run {r.name}: {target_record.FILE} cannot be read ({e})."))
            else:
                file = f"search_target{suffix}.png"
                parts.append(search_target.section(r.name, target, plots_dir, file))
    return "<h2>Search</h2>\n" + "\n".join(parts) if parts else ""


def _saving(make: Callable[[], T]) -> Callable[[], tuple[T, list[str]]]:
    """`make` that also returns the chart files it saved (figure.SAVED), in whichever process
    it runs."""

    def made() -> tuple[T, list[str]]:
        figure.SAVED.clear()
        return make(), list(figure.SAVED)

    return made


def made_in_parallel(makes: Sequence[Callable[[], T]], processes: int) -> list[T]:
    """Each of `makes` called once, in up to `processes` forked processes, and their values in
    the order of `makes` (they must pickle); a job's error is raised here. Where this process
    cannot fork safely (not Linux, a daemonic process) or has a single core, they are called
    here in turn. The workers end with it: an exception here (Ctrl-C, SIGTERM as
    run.interrupt.Terminated) ends and reaps them before it is raised, and a worker whose
    parent died (SIGKILL) is ended by the kernel."""
    workers = min(processes, len(makes), _cores())
    if workers < 2 or sys.platform != "linux" or mp.current_process().daemon:
        return [make() for make in makes]
    global _JOBS
    _JOBS = makes  # a forked worker inherits them: closures need not pickle, only values
    try:
        with ProcessPoolExecutor(
            workers, mp_context=mp.get_context("fork"), initializer=_worker_signals
        ) as pool:
            # the workers are forked with Ctrl-C blocked: this process alone meets it and ends
            # them (one line, not a traceback from each worker)
            held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                futures = [pool.submit(_call, i) for i in range(len(makes))]
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
            try:
                return [f.result() for f in futures]
            except BaseException:
                # ended before the pool's queues close under them: a worker reading a closed
                # queue would print its own traceback beside this process's one line
                children = list(pool._processes.values()) if pool._processes else []
                for child in children:
                    child.terminate()
                for child in children:
                    child.join()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
    finally:
        _JOBS = ()


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _worker_signals() -> None:
    """In a chart worker: Ctrl-C is its parent's to handle (ignored here), SIGTERM ends it at
    once (not a handler it inherited from the parent), and the kernel sends it SIGTERM when
    its parent dies, so that no worker outlives the report."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() == 1:  # the parent died before the request: end now
        os._exit(1)


_JOBS: Sequence[Callable[[], Any]] = ()


def _call(i: int) -> Any:
    return _JOBS[i]()


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def _batch_varies(frame: pd.DataFrame) -> bool:
    """Whether some series (the whole identity but the batch size: report.series) ran at two
    batch sizes or more, so a chart against the batch size draws a curve."""
    ok = A.ok_rows(frame)
    if ok.empty or "series" not in ok:
        return False
    return bool((ok.groupby("series")["batch_size"].nunique() > 1).any())


# A note names at most this many points; the rest are counted (the table of all points marks
# every one).
NAMED = 8


def standing_notes(runs: Sequence[Run]) -> list[str]:
    """What the answer stands on, for the first screen (issue 21): per run measured on a busy
    machine the line the sweep printed, and per run with contended (busy) or noisy points the
    points themselves, named by what tells them apart."""
    notes = []
    for r in runs:
        records = r.frame.to_dict("records")
        line = load.busy_line(r.env, records)
        if line is not None:
            notes.append(H.note(f"Run {r.name}: {line}."))
        if not records:
            continue
        points = S.assign(r.frame.assign(device_name=r.frame["device"]), "point", without=())
        names = S.labels(points, "point", fallback=("model", "device_name", "batch_size"))
        for flag, what in (
            ("busy", "measured while other processes shared the machine (contended)"),
            ("noisy", "noisy (the median's confidence interval stayed wider than the target)"),
        ):
            if flag not in points:
                continue
            hit = points[points[flag] == True]  # noqa: E712 (nulls are not flagged)
            if hit.empty:
                continue
            named = [names[str(p)] for p in hit["point"]]
            shown = "; ".join(named[:NAMED]) + (
                f"; and {len(named) - NAMED} more" if len(named) > NAMED else ""
            )
            notes.append(
                H.note(
                    f"Run {r.name}: {len(hit)} of {plural(len(points), 'point')} {what}, so "
                    f"the answer below may stand on them: {shown}."
                )
            )
    return notes


def header(runs: Sequence[Run]) -> str:
    """The line under the title: each run's suite name and the gpubench commit it ran."""
    parts = [
        f"{r.name} (suite {r.suite_name or 'not recorded'}, "
        f"gpubench commit {r.commit or 'not recorded'})"
        for r in runs
    ]
    return f'<p class="caption">Runs: {H.e("; ".join(parts))}.</p>'


def _speedup(frame: pd.DataFrame, table: pd.DataFrame, plots_dir: Path) -> str:
    has_cpu = (frame["device"] == "cpu").any()
    has_gpu = (frame["device"] != "cpu").any()
    head = "<h2>Speedup over the CPU</h2>\n"
    if not has_cpu or not has_gpu:
        which = "no CPU rows" if not has_cpu else "no GPU rows"
        return head + H.note(
            f"No speedup to show: these runs have {which}. Give `report` a CPU run and a GPU run "
            "together to compare them."
        )
    if table.empty:
        return head + H.note(
            "No speedup to show: no GPU point that ran has a CPU point with the same identity "
            "(model, size, precision, optimizer, batch size, speed options, threads, ...) that ran."
        )
    c = plots.speedup(table, plots_dir)
    caption, body = tables.speedups(table)
    caption = f"{caption} {_contended(frame)}".strip()
    return head + f'<p class="caption">{H.e(caption)}</p>\n' + (H.figure(c) if c else "") + body


def _contended(frame: pd.DataFrame) -> str:
    """Per device, how many of the rows that ran were contended (busy), said beside the
    speedups they enter ('' where none was): a speedup is compared whatever the rows' load."""
    ok = A.ok_rows(frame)
    if "busy" not in ok:
        return ""
    said = []
    for device, rows in ok.groupby("device", sort=True):
        busy = int((rows["busy"] == True).sum())  # noqa: E712 (nulls are not busy)
        if busy:
            said.append(f"{busy} of {plural(len(rows), f'{device} row')}")
    if not said:
        return ""
    return (
        f"Measured contended (busy): {'; '.join(said)}; their speedups are shown all the same, "
        "and may be lower or higher than on a quiet machine."
    )
