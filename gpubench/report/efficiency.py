"""Samples per joule and per dollar against batch size (issue 32), GPU and CPU series on one
chart: a panel per model, its samples/J on top and, where the rows have prices, its samples per
dollar beneath. The energy is the training device's: NVML's on a GPU, RAPL's on the CPU, or the
CPU's power the user stated (--cpu-watts) times the step time, which the caption says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.report import analysis as A
from gpubench.report.figure import Chart, batch_axis, empty_panel, log_y, save
from gpubench.report.series_style import SeriesStyles

FILE = "efficiency.png"
EMPTY = {
    "samples per joule": "no energy figure in these rows",
    "samples per US dollar": "no price for these devices",
}


def samples_per_j(rows: pd.DataFrame) -> pd.Series:
    """The series' samples per joule: its batch over its energy per step (the CPU's column
    for CPU rows, the GPU's NVML one otherwise); NaN where it has none."""
    cpu = bool((rows["device"] == "cpu").all())
    return _per_joule(rows, "cpu_energy_j_per_step" if cpu else "energy_j_per_step")


def numbers(rows: pd.DataFrame, column: str) -> pd.Series:
    """`rows`' `column` as floats: NaN where it is null, not a number, or not a column."""
    if column not in rows:
        return pd.Series([float("nan")] * len(rows), index=rows.index)
    return pd.to_numeric(rows[column], errors="coerce")


def _per_joule(rows: pd.DataFrame, column: str) -> pd.Series:
    joules = numbers(rows, column)
    return pd.to_numeric(rows["batch_size"], errors="coerce") / joules.where(joules > 0)


def efficiency(frame: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """The chart, or None where no row has an energy figure."""
    ok = A.ok_rows(frame).sort_values("batch_size")
    energy = [samples_per_j(g).notna().any() for _, g in ok.groupby("series")]
    if ok.empty or not any(energy):
        return None
    priced = "usd_per_million_samples" in ok and ok["usd_per_million_samples"].notna().any()
    styles = SeriesStyles(frame)
    models, fig, axes, keys = styles.panels(ok, rows_per_title=2 if priced else 1)
    for model, model_axes in zip(models, axes, strict=True):
        rows = ok[ok["panel"] == model]
        for series, g in rows.groupby("series"):
            style = styles.line(str(series))
            model_axes[0].plot(g["batch_size"], samples_per_j(g), label="_", **style)
            if priced:
                per_dollar = 1e6 / numbers(g, "usd_per_million_samples")
                model_axes[1].plot(g["batch_size"], per_dollar, label="_", **style)
        ylabels = ("samples per joule", "samples per US dollar")[: len(model_axes)]
        for ax, ylabel in zip(model_axes, ylabels, strict=True):
            ax.set_ylabel(f"{ylabel} (log scale)")
            if not _has_data(ax):
                empty_panel(ax, EMPTY[ylabel])
                continue
            batch_axis(ax, rows["batch_size"])
            log_y(ax)
    stated = "cpu_energy_method" in ok and bool((ok["cpu_energy_method"] == "stated").any())
    title = "Samples per joule" + (" and per dollar" if priced else "") + " against batch size"
    save(fig, plots_dir, FILE, title, keys=keys)
    return Chart(FILE, "Energy and cost efficiency", _caption(priced, stated))


def _has_data(ax: Any) -> bool:
    """Whether any line of `ax` has a finite point (a log axis needs one)."""
    return any(pd.notna(pd.Series(line.get_ydata(), dtype=float)).any() for line in ax.get_lines())


def _caption(priced: bool, stated: bool) -> str:
    text = (
        "Samples trained per joule of the training device: the GPU's energy from NVML, the "
        "CPU's from RAPL."
    )
    if stated:
        text += (
            " Where RAPL did not measure the CPU, its energy is the power stated by --cpu-watts "
            "times the step time: its line is the CPU's throughput over that one power, not a "
            "measurement."
        )
    if priced:
        text += (
            " Beneath, samples per US dollar at the sweep's --price (each device's hour over "
            "the samples it trains in it)."
        )
    return text
