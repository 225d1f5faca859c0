"""Build the report of one or more run folders: report.html plus its charts in plots/."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd

from gpubench.config.precision import PRECISION_NOTE
from gpubench.probes import load
from gpubench.report import analysis as A
from gpubench.report import html as H
from gpubench.report import learning, plots, why_plots
from gpubench.report import scaling as parallel_report
from gpubench.report.explain import run_verdicts
from gpubench.report.figure import Chart
from gpubench.report.runs import Run, combine, load_runs
from gpubench.report.series_style import short_series
from gpubench.report.verdict_section import verdict_section

CHART_FILES = (
    "throughput.png",
    "step_time.png",
    "memory.png",
    "compute.png",
    "energy.png",
    "speedup.png",
    "loss_curves.png",
    "time_to_target.png",
    "breakdown.png",
    "roofline.png",
)


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
    for name in CHART_FILES:  # a chart this report does not draw must not linger from an old one
        (plots_dir / name).unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Names come from results files: a '$' in one must print as itself, not start mathtext.
    with matplotlib.rc_context({"text.parse_math": False}):
        return _build(runs, path, plots_dir)


def _build(runs: Sequence[Run], path: Path, plots_dir: Path) -> Path:
    frame = combine(runs)
    capacity = {
        (r.name, str(d)): r.device_memory_bytes(str(d)) for r in runs for d in r.frame["device"]
    }
    threads = {r.name: r.cpu_threads() for r in runs}
    speedups = A.speedup_table(frame, threads)
    # The page opens with the answer (and any busy-machine warning); the long tables come after
    # the charts (issue 15).
    sections = [verdict_section(run_verdicts(runs, frame)), *_busy_notes(runs)]
    missing: list[str] = []

    def draw(make: Callable[[], Chart | None], why_absent: str) -> None:
        c = make()
        if c is None:
            missing.append(why_absent)
        else:
            sections.append(H.chart(c))

    draw(lambda: plots.throughput(frame, plots_dir), "Throughput: no point ran successfully.")
    draw(lambda: plots.step_time(frame, plots_dir), "Step time: no point ran successfully.")
    draw(
        lambda: why_plots.breakdown(frame, plots_dir),
        "Step-time breakdown: no point was profiled (profiling off, or runs made before it).",
    )
    draw(
        lambda: why_plots.roofline(frame, plots_dir),
        "Roofline: no point has FLOPs, minimum bytes and measured roofs.",
    )
    draw(
        lambda: plots.memory(frame, plots_dir, capacity),
        "Memory: no memory column was measured in these runs.",
    )
    sections.append(_speedup(frame, speedups, plots_dir))
    sections.append(parallel_report.section(frame, plots_dir))  # issue 17: '' if none
    draw(lambda: plots.compute(frame, plots_dir), "Compute: no TFLOP/s or MFU was measured.")
    draw(lambda: plots.energy(frame, plots_dir), "Energy: no device energy was measured.")
    draw(
        lambda: learning.loss_curves(frame, plots_dir),
        "Loss curves: no row carries a loss curve (only convergence runs record one).",
    )
    draw(
        lambda: learning.time_to_target(frame, runs, plots_dir),
        "Time to target: no row reached a target (only convergence runs set one).",
    )
    if missing:
        sections.append(
            "<h2>Charts not drawn</h2>\n<ul>"
            + "".join(f"<li>{H.e(m)}</li>" for m in missing)
            + "</ul>"
        )
    sections.append(_summary(frame, capacity))
    sections.append(_failures(frame))
    sections.append(_all_rows(frame))
    sections.append(H.runs_section(runs))
    sections.append(H.environment_section(runs))
    title = "gpubench report: " + ", ".join(r.name for r in runs)
    path.write_text(H.page(title, sections), encoding="utf-8")
    return path


def _busy_notes(runs: Sequence[Run]) -> list[str]:
    """Per run measured on a busy machine, the line the sweep printed about it."""
    notes = []
    for r in runs:
        line = load.busy_line(r.env, r.frame.to_dict("records"))
        if line is not None:
            notes.append(H.note(f"Run {r.name}: {line}."))
    return notes


def _summary(frame: pd.DataFrame, capacity: dict[tuple[str, str], int | None]) -> str:
    s = A.series_summary(frame, capacity)
    if s.empty:
        return "<h2>Summary</h2>\n" + H.note("These runs hold no rows.")
    rows = []
    for r in s.to_dict("records"):
        per_sample = r["memory_per_sample_bytes"]
        rows.append(
            [
                r["model"],
                short_series(r["series"]),
                (str(r["points_ok"]), r["points_ok"]),
                (H.number(r["best_samples_per_s"], ",.0f"), r["best_samples_per_s"]),
                (H.number(r["throughput_optimal_batch"], "d"), r["throughput_optimal_batch"]),
                (H.number(r["latency_floor_s"], ",.4g", 1e3), r["latency_floor_s"]),
                (H.number(per_sample, ",.2f", 1 / 2**20), per_sample),
                (H.number(r["predicted_max_batch"], ",d"), r["predicted_max_batch"]),
                (H.number(r["oom_batch"], "d"), r["oom_batch"]),
            ]
        )
    headers = [
        "model",
        "device, precision, optimizer, options",
        "points ok",
        "best samples/s",
        "throughput-optimal batch",
        "latency floor (ms)",
        "memory per sample (MiB)",
        "predicted largest batch",
        "first OOM batch",
    ]
    # A column with nothing in any series (memory and OOM on a CPU run, say) is left out.
    keep = [i for i, _ in enumerate(headers) if any(_cell_text(row[i]) for row in rows)]
    dropped = [headers[i] for i in range(len(headers)) if i not in keep]
    absent = f" Not measured in these runs, so not shown: {', '.join(dropped)}." if dropped else ""
    return (
        "<h2>Summary</h2>\n"
        '<p class="caption">Per model and series. The throughput-optimal batch is the smallest '
        "within 5% of the best samples/s; the latency floor is the shortest median step; the "
        "memory per sample and predicted largest batch come from the fitted memory line and the "
        f"device's memory (GPUs).{H.e(absent)} {H.e(PRECISION_NOTE)}</p>\n"
        + H.table([headers[i] for i in keep], [[row[i] for i in keep] for row in rows], True)
    )


def _cell_text(cell: tuple[str, object] | str) -> str:
    return cell[0] if isinstance(cell, tuple) else cell


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
            "No speedup to show: no GPU point that ran has a CPU point with the same model, "
            "size, precision, optimizer and batch size that ran."
        )
    c = plots.speedup(table, plots_dir)
    threads = sorted({int(t) for t in table["cpu_threads"].dropna()})
    cpus = sorted(set(table["cpu_name"]))
    stated = (
        f"The CPU ({'; '.join(cpus)}) ran with {', '.join(map(str, threads))} torch thread(s)."
        if threads
        else f"The CPU ({'; '.join(cpus)}) thread count was not recorded."
    )
    rows = [
        [
            r["model"],
            r["device_name"],
            r["precision"],
            r["optimizer"],
            (str(int(r["batch_size"])), r["batch_size"]),
            (H.number(r["cpu_step_time_s"], ",.3f", 1e3), r["cpu_step_time_s"]),
            (H.number(r["gpu_step_time_s"], ",.3f", 1e3), r["gpu_step_time_s"]),
            (H.number(r["speedup"], ",.1f") + "x", r["speedup"]),
        ]
        for r in table.to_dict("records")
    ]
    headers = ["model", "GPU", "precision", "optimizer", "batch", "CPU ms", "GPU ms", "speedup"]
    body = H.figure(c) if c else ""
    return (
        head
        + f'<p class="caption">{H.e(stated)}</p>\n'
        + body
        + H.table(headers, rows, sortable=True)
    )


def _failures(frame: pd.DataFrame) -> str:
    bad = frame[frame["status"] != "ok"]
    head = "<h2>Failed and unsupported points</h2>\n"
    if bad.empty:
        return head + ("<p>Every point ran.</p>" if len(frame) else "<p>No points.</p>")
    rows = [
        [
            r["run"],
            r["model"],
            r["device"],
            r["precision"],
            r["optimizer"],
            (str(int(r["batch_size"])), r["batch_size"]),
            r["status"],
            r["error"],
        ]
        for r in bad.to_dict("records")
    ]
    headers = ["run", "model", "device", "precision", "optimizer", "batch", "status", "reason"]
    return head + H.table(headers, rows, sortable=True)


# (column, header, format, scale) for the table of all rows; a column of nulls is left out.
ROW_COLUMNS = [
    ("step_time_s", "step ms", ",.3f", 1e3),
    ("step_time_iqr_s", "IQR ms", ",.3f", 1e3),
    ("steps_measured", "steps", "d", 1),
    ("samples_per_s", "samples/s", ",.0f", 1),
    ("tokens_per_s", "tokens/s", ",.0f", 1),
    ("tflops", "TFLOP/s", ".3g", 1),
    ("mfu", "MFU %", ".1f", 100),
    ("matmul_roof_fraction", "roof %", ".1f", 100),
    ("torch_peak_allocated_bytes", "alloc MiB", ",.0f", 1 / 2**20),
    ("torch_peak_reserved_bytes", "reserved MiB", ",.0f", 1 / 2**20),
    ("nvml_peak_used_bytes", "NVML MiB", ",.0f", 1 / 2**20),
    ("host_peak_rss_bytes", "RSS MiB", ",.0f", 1 / 2**20),
    ("energy_j_per_step", "J/step", ".3g", 1),
    ("avg_power_w", "W", ",.0f", 1),
    ("loss_first", "loss first", ".4g", 1),
    ("loss_last", "loss last", ".4g", 1),
    ("eval_loss", "eval loss", ".4g", 1),
    ("eval_accuracy", "eval acc", ".3f", 1),
    ("steps_to_target", "steps to target", ",.0f", 1),
    ("time_to_target_s", "s to target", ",.2f", 1),
    ("torch_threads", "threads", "d", 1),  # issue 14: the threads each point ran with
]


def _status(row: dict[str, Any]) -> str:
    """The row's status; a convergence run that never reached its target says it missed it."""
    missed = pd.notna(row.get("target")) and pd.isna(row.get("steps_to_target"))
    return "ok, missed target" if row["status"] == "ok" and missed else str(row["status"])


def _all_rows(frame: pd.DataFrame) -> str:
    cols = [c for c in ROW_COLUMNS if frame[c[0]].notna().any()]
    headers = [
        "run",
        "model",
        "size",
        "device",
        "precision",
        "optimizer",
        "batch",
        "seed",
        "status",
        "noisy",
    ]
    busy = "busy" in frame and bool((frame["busy"] == True).any())  # noqa: E712 (nulls too)
    headers += ["busy"] if busy else []
    headers += [h for _, h, _, _ in cols]
    rows = []
    for r in frame.to_dict("records"):
        cells: list[tuple[str, object] | str] = [
            r["run"],
            r["model"],
            "" if ":" in r["model"] else r["model_size"],  # a user's model has no size preset
            r["device"],
            r["precision"],
            r["optimizer"],
            (str(int(r["batch_size"])), r["batch_size"]),
            (H.number(r["seed"], ".0f"), r["seed"]),
            _status(r),
            "noisy" if r.get("noisy") is True else "",
        ]
        cells += ["busy" if r.get("busy") is True else ""] if busy else []
        cells += [(H.number(r[c], f, s), r[c]) for c, _, f, s in cols]
        rows.append(cells)
    return (
        '<h2>All points</h2>\n<p class="caption">Click a column\'s heading to sort by it.</p>\n'
        + H.table(headers, rows, sortable=True)
    )
