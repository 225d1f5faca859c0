"""The speed charts: throughput, step time, memory, compute and energy against batch size, and
speedup over the CPU. Each function returns a Chart, or None when its data is absent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from gpubench.report import analysis as A
from gpubench.report import series as S
from gpubench.report.efficiency import numbers
from gpubench.report.figure import (
    STAR,
    Chart,
    batch_axis,
    empty_panel,
    log_y,
    palette,
    panels_of,
    save,
)
from gpubench.report.series_style import SeriesStyles
from gpubench.science.throughput import throughput_optimal_batch

GiB = 1024**3
# The memory chart extends each fitted line to this many times the largest batch measured; a
# predicted largest batch further out is named in the summary table rather than drawn.
EXTEND = 4


def _mark_oom(ax, group: pd.DataFrame, color) -> bool:  # type: ignore[no-untyped-def]
    """A dotted vertical line at the first batch that ran out of memory; True if drawn."""
    oom = A.oom_batch(group)
    if oom is None:
        return False
    ax.axvline(oom, color=color, linestyle=":", linewidth=1.5, label="out of memory at this batch")
    return True


def _star_best(ax, g: pd.DataFrame, y: pd.Series, color) -> None:  # type: ignore[no-untyped-def]
    """A star at the series' throughput-optimal batch, at its value of `y` (what the panel
    plots)."""
    best = throughput_optimal_batch(g["batch_size"], g["samples_per_s"])
    at = y[g["batch_size"] == best]
    if best is not None and len(at):
        ax.plot(best, at.iloc[0], "*", color=color, markersize=14, mec="black", label=STAR)


def throughput(frame: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Samples/s (tokens/s for sequence models) against batch size, a line per series, the
    throughput-optimal batch starred and the OOM boundary dotted."""
    ok = A.ok_rows(frame)
    if ok["samples_per_s"].notna().sum() == 0:
        return None
    styles = SeriesStyles(frame)
    models, fig, axes, keys = styles.panels(frame)
    for model, (ax,) in zip(models, axes, strict=True):
        rows = frame[frame["panel"] == model]
        good = A.ok_rows(rows)
        tokens = good["tokens_per_s"].notna().any()
        metric, unit = ("tokens_per_s", "tokens/s") if tokens else ("samples_per_s", "samples/s")
        for series, group in rows.groupby("series"):
            g = A.ok_rows(group)
            color = styles.colour(str(series))
            if len(g):
                ax.plot(g["batch_size"], g[metric], label="_", **styles.line(str(series)))
                _star_best(ax, g, g[metric], color)
                _mark_unstable(ax, g, metric)
            _mark_oom(ax, group, color)
        if good.empty:
            empty_panel(ax, "no point of this model ran")
            continue
        batch_axis(ax, rows["batch_size"], f"throughput ({unit}, log scale)")
    file = "throughput.png"
    save(fig, plots_dir, file, "Training throughput against batch size", keys=keys)
    return Chart(
        file,
        "Throughput",
        "Samples per second (tokens per second for sequence models) from the median step time. "
        "A star marks the throughput-optimal batch: the smallest within 5% of the best "
        "throughput. A dotted line marks the first batch that ran out of memory. A point is "
        "the verdict's re-measurement where it re-measured that configuration; a ringed cross "
        "marks one re-measured outside its row's own 95% interval (unstable).",
    )


def _mark_unstable(ax: Axes, g: pd.DataFrame, metric: str) -> None:
    """A ringed cross on each point of `g` flagged `unstable` (science.remeasured)."""
    if "unstable" not in g:
        return
    bad = g[[v is True for v in g["unstable"]]]
    if len(bad):
        ax.scatter(
            bad["batch_size"],
            bad[metric],
            marker="X",
            s=90,
            facecolors="none",
            edgecolors="black",
            linewidths=1.2,
            zorder=5,
        )


def step_time(frame: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Median step time against batch size with IQR bars, the latency floor and the
    throughput-optimal batch."""
    ok = A.ok_rows(frame)
    if ok.empty:
        return None
    styles = SeriesStyles(frame)
    models, fig, axes, keys = styles.panels(frame)
    for model, (ax,) in zip(models, axes, strict=True):
        rows = frame[frame["panel"] == model]
        good = A.ok_rows(rows)
        if good.empty:
            empty_panel(ax, "no point of this model ran")
            continue
        for series, group in rows.groupby("series"):
            g = A.ok_rows(group)
            color = styles.colour(str(series))
            if g.empty:
                continue
            ms = g["step_time_s"] * 1e3
            iqr = g["step_time_iqr_s"].fillna(0) * 1e3 / 2
            ax.errorbar(g["batch_size"], ms, yerr=iqr, capsize=3, label="_", **styles.line(series))
            floor = A.latency_floor(g["step_time_s"])
            if floor is not None:  # across the series' own batches: a dozen full-width lines blur
                ax.hlines(
                    floor * 1e3,
                    g["batch_size"].min(),
                    g["batch_size"].max(),
                    color=color,
                    linestyle=(0, (1, 1)),
                    linewidth=0.8,
                    alpha=0.7,
                    label="latency floor (shortest step measured)",
                )
            _star_best(ax, g, ms, color)
        batch_axis(ax, rows["batch_size"], "median step time (ms, log scale)")
    file = "step_time.png"
    save(fig, plots_dir, file, "Time per training step against batch size", keys=keys)
    return Chart(
        file,
        "Step time",
        "Median time of one training step (forward, loss, backward, optimizer step); bars span "
        "the interquartile range. The finely dotted line is the latency floor, the shortest step "
        "measured: below it a smaller batch saves no time. The star is the throughput-optimal "
        "batch.",
    )


def memory(
    frame: pd.DataFrame, plots_dir: Path, capacity: dict[tuple[str, str], int | None]
) -> Chart | None:
    """Peak memory against batch size (per series the column the fit uses: the point's own
    device memory, analysis.memory_column; host RSS where none was measured), the fitted line
    fixed + per-sample x B, the device capacity, and the predicted largest batch."""
    ok = A.ok_rows(frame)
    cols = [c for c in A.MEMORY_COLUMNS if c in ok and ok[c].notna().any()]
    if not cols:
        return None
    series_styles = SeriesStyles(frame)
    models, fig, axes, keys = series_styles.panels(frame)
    for model, (ax,) in zip(models, axes, strict=True):
        rows = frame[frame["panel"] == model]
        good = A.ok_rows(rows)
        if good.empty or not any(good[c].notna().any() for c in cols):
            empty_panel(ax, "no memory measured for this model")
            continue
        caps_drawn = set()
        for series, group in rows.groupby("series"):
            g = A.ok_rows(group)
            color = series_styles.colour(str(series))
            # One measurement per series keeps the chart legible; the table of all points
            # has every column.
            shown = A.memory_column(g) or "host_peak_rss_bytes"
            m = g[g[shown].notna()] if shown in g else g.iloc[0:0]
            if len(m):
                ax.plot(m["batch_size"], m[shown] / GiB, label="_", **series_styles.line(series))
            fit_col = A.memory_column(g)
            fit = A.fit_memory(g["batch_size"], g[fit_col]) if fit_col else None
            cap = capacity.get((group["run"].iloc[0], group["device_name"].iloc[0]))
            if fit is not None:
                top = fit.largest_batch(cap)
                reach = EXTEND * float(g["batch_size"].max())
                if top is not None and top > reach:
                    top = None  # too far to draw: the summary table names it
                xs = np.geomspace(float(g["batch_size"].min()), float(top or reach))
                ax.plot(
                    xs,
                    [fit.at(x) / GiB for x in xs],
                    ":",
                    color=color,
                    linewidth=1,
                    label="fitted line: fixed + per-sample x batch",
                )
                if top is not None and cap is not None:
                    ax.plot(
                        top,
                        cap / GiB,
                        "v",
                        color=color,
                        markersize=9,
                        mec="black",
                        label="predicted largest batch",
                    )
            if cap is not None and cap not in caps_drawn:
                caps_drawn.add(cap)
                ax.axhline(cap / GiB, color="red", linewidth=1, label="device memory")
            _mark_oom(ax, group, color)
        # log: a straight fit stays readable, and a small RSS is not flattened at 0
        batch_axis(ax, good["batch_size"], "peak memory (GiB, log scale)")
    file = "memory.png"
    save(fig, plots_dir, file, "Peak memory against batch size", keys=keys)
    return Chart(
        file,
        "Memory",
        "Peak memory of the measured steps, the point's own: on a GPU, what NVML counts for "
        "the point's process (the PyTorch allocator's reserved memory and the CUDA context; "
        "else the allocator's reserved, else allocated peak), never the device-wide use, "
        "which counts every process on the card, gpubench's own parent among them; on the CPU, "
        "the host RSS (every column is in the table of all points). The dotted line is the "
        "least-squares fit memory = fixed + per-sample x batch of that measurement, extended "
        "to where it meets the device memory (a triangle: the predicted largest batch) when "
        "that is within 4x the largest batch measured; further out the summary table names it.",
    )


def compute(frame: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Achieved TFLOP/s, MFU (against the datasheet peak) and the fraction of the measured
    matmul roof against batch size (each only where known)."""
    ok = A.ok_rows(frame)
    metrics = [
        (c, label)
        for c, label in (
            ("tflops", "achieved TFLOP/s"),
            ("mfu", "MFU (% of datasheet peak)"),
            ("matmul_roof_fraction", "% of measured matmul roof"),
        )
        if ok[c].notna().any()
    ]
    if not metrics:
        return None
    styles = SeriesStyles(frame)
    measured = ok[ok[[c for c, _ in metrics]].notna().any(axis=1)]
    models, fig, axes, keys = styles.panels(measured, len(metrics))
    for model, col_axes in zip(models, axes, strict=True):
        rows = A.ok_rows(frame[frame["panel"] == model])
        for ax, (col, label) in zip(col_axes, metrics, strict=True):
            have = rows[rows[col].notna()]
            if have.empty:
                empty_panel(ax, f"no {label} for this model")
                continue
            for series, g in have.groupby("series"):
                scale = 1 if col == "tflops" else 100
                ax.plot(g["batch_size"], g[col] * scale, label="_", **styles.line(str(series)))
            batch_axis(ax, rows["batch_size"])
            ax.set_ylabel(label)
            if col == "tflops":
                log_y(ax)
    file = "compute.png"
    save(fig, plots_dir, file, "Compute: achieved TFLOP/s and model FLOPs utilisation", keys=keys)
    return Chart(
        file,
        "Compute",
        "Achieved TFLOP/s is the FLOPs of one training step over its median time. MFU (model "
        "FLOPs utilisation) divides it by the device's datasheet dense peak for that precision, "
        "as PaLM, nanoGPT and torchtitan define it (empty where the peak is not known, as on a "
        "CPU); the fraction of the measured matmul roof divides it by the matrix-multiply peak "
        "measured on this device instead.",
    )


ENERGY_FILE = "energy.png"


def _measured_j_per_step(rows: pd.DataFrame) -> pd.Series:
    """Each row's energy per step on its training device (J): the GPU's (NVML), the CPU
    package's (RAPL, or the user's stated watts x its step time: --cpu-watts); NaN where
    there is none."""
    gpu = rows["device"] != "cpu"
    return numbers(rows, "energy_j_per_step").where(gpu, numbers(rows, "cpu_energy_j_per_step"))


def energy(frame: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Energy per sample (J) against batch size, where the training device's energy is known
    (NVML on a GPU, RAPL or the stated --cpu-watts on the CPU)."""
    ok = A.ok_rows(frame)
    if ok.empty or "energy_j_per_step" not in ok:
        return None
    ok = ok.assign(measured_j=_measured_j_per_step(ok))
    ok = ok[ok["measured_j"].notna()]
    if ok.empty:
        return None
    styles = SeriesStyles(frame)
    models, fig, axes, keys = styles.panels(ok)
    for model, (ax,) in zip(models, axes, strict=True):
        rows = ok[ok["panel"] == model]
        for series, g in rows.groupby("series"):
            per_sample = g["measured_j"] / g["batch_size"]
            ax.plot(g["batch_size"], per_sample * 1e3, label="_", **styles.line(str(series)))
        batch_axis(ax, rows["batch_size"], "energy per sample (mJ, log scale)")
    save(fig, plots_dir, ENERGY_FILE, "Energy per training sample against batch size", keys=keys)
    return Chart(
        ENERGY_FILE,
        "Energy",
        "Energy of the training device over the measured steps (NVML on a GPU, the RAPL "
        "package on the CPU, or where given the CPU's watts stated by --cpu-watts times the "
        "step time) divided by the samples they trained.",
    )


def speedup(table: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Bars of GPU-over-CPU speedup per batch size, a panel per model and size, and side by
    side at each batch one bar per GPU series (the whole identity but the batch: eager and
    compiled, or two thread counts, are two bars, never one drawn over the other)."""
    if table.empty:
        return None
    names = S.labels(table, "series", exclude=S.PANEL)
    colors = palette(names.values())
    models, fig, axes = panels_of(table)
    for model, (ax,) in zip(models, axes, strict=True):
        rows = table[table["panel"] == model]
        batches = sorted(rows["batch_size"].unique())
        series = sorted(rows["series"].unique(), key=lambda s: names[s])
        width = 0.8 / len(series)
        for i, s in enumerate(series):
            g = rows[rows["series"] == s]
            xs = [batches.index(b) + (i - (len(series) - 1) / 2) * width for b in g["batch_size"]]
            ax.bar(xs, g["speedup"], width=width, color=colors[names[s]], label=names[s])
        ax.set_xticks(range(len(batches)))
        ax.set_xticklabels([str(int(b)) for b in batches], fontsize=8)
        ax.set_xlabel("batch size (samples per step)")
        ax.axhline(1, color="black", linewidth=0.8)
        log_y(ax)
        ax.set_ylabel("speedup over the CPU (x, log scale)")
        ax.grid(True, axis="y", alpha=0.3)
    file = "speedup.png"
    save(fig, plots_dir, file, "Speedup of each GPU point over the same point on the CPU")
    return Chart(
        file,
        "Speedup over the CPU",
        "CPU median step time over GPU median step time for the same point: the same model, "
        "size, precision, optimizer, batch size, speed options, threads, data, seed and every "
        "other identity field. Above 1 the GPU is faster. Bars of one batch size stand side "
        "by side, one per GPU series.",
    )
