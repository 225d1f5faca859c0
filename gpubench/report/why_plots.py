"""The charts of why: where each step's time goes (by category of work, against batch size),
and the roofline (achieved TFLOP/s against arithmetic intensity, under the measured roofs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpubench.probes.profile import CATEGORIES
from gpubench.report import analysis as A
from gpubench.report import series as S
from gpubench.report.figure import Chart, log_y, panels_of, readable_log, save
from gpubench.report.series_style import SeriesStyles
from gpubench.science.bottleneck import busy_fraction
from gpubench.store.wording import milliseconds, number

CATEGORY_COLOURS = {
    "matmul": "#1f77b4",
    "conv": "#17becf",
    "attention": "#9467bd",
    "norm": "#ff7f0e",
    "elementwise": "#2ca02c",
    "loss_reduction": "#bcbd22",
    "optimizer": "#d62728",
    "copy": "#8c564b",
    "collective": "#e377c2",
    "other": "#c7c7c7",
}
IDLE = "device idle (host, Python, launches)"


def _profiled(frame: pd.DataFrame) -> pd.DataFrame:
    ok = A.ok_rows(frame)
    if "profile" not in ok:
        return ok.iloc[0:0]
    return ok[[isinstance(p, dict) and bool(p.get("category_s")) for p in ok["profile"]]]


def breakdown(frame: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Per model, for the series of its fastest point: each batch size's profiled step split
    into categories of device work and the device's idle time, as shares of the step."""
    rows = _profiled(frame)
    if rows.empty:
        return None
    models, fig, axes = panels_of(rows)
    for model, (ax,) in zip(models, axes, strict=True):
        of_model = rows[rows["panel"] == model]
        best = of_model.loc[of_model["samples_per_s"].idxmax()]
        g = of_model[of_model["series"] == best["series"]].sort_values("batch_size")
        _stack(ax, g)
        # Named by what tells it from the other series of this model (all of its identity
        # but the batch where nothing does).
        names = S.labels(frame[frame["panel"] == model], exclude=S.PANEL)
        ax.set_title(f"{model}: {names[str(best['series'])]}", fontsize=9)
    save(fig, plots_dir, "breakdown.png", "Where a step's time goes, by batch size")
    return Chart(
        "breakdown.png",
        "Step-time breakdown",
        "A few steps of each point profiled after its measured windows (torch.profiler): the "
        "device's busy time (kernel time on a GPU, operator time on the CPU) as a share of the "
        "measured median step (without the profiler), split by category of work, and the rest "
        "of the step, idle, waiting on the host. The busy share is the verdict's \"device "
        'busy"; busy time above the median step (the profiler slows what it times) counts as '
        "the whole step. Shown for the series of each model's fastest point; the label on each "
        "bar is the median step time.",
    )


def step_shares(row: dict[str, Any]) -> tuple[dict[str, float], float]:
    """Each category's share of the row's median (unprofiled) step and the idle share, which
    sum to 1: the busy share is the verdict's "device busy" (science.bottleneck.busy_fraction:
    the profile's busy seconds over the median step, capped at 1), split among the categories
    as the profile split its busy time (kernels may overlap, so by their sum)."""
    measured = busy_fraction(row)
    busy = 0.0 if measured is None else measured[0]
    cats = {k: float(v or 0.0) for k, v in row["profile"]["category_s"].items()}
    total = sum(cats.values())
    shares = {k: (v / total * busy if total > 0 else 0.0) for k, v in cats.items()}
    return shares, 1.0 - busy


def _stack(ax: Any, g: pd.DataFrame) -> None:
    xs = np.arange(len(g))
    bottom = np.zeros(len(g))
    split = [step_shares(r) for r in g.to_dict("records")]
    for cat in CATEGORIES:
        share = np.array([shares.get(cat, 0.0) for shares, _ in split])
        if share.max(initial=0) <= 0:
            continue
        ax.bar(xs, share * 100, bottom=bottom, color=CATEGORY_COLOURS[cat], label=cat, width=0.7)
        bottom += share * 100
    idle = np.array([idle for _, idle in split]) * 100
    ax.bar(xs, idle, bottom=bottom, color="white", edgecolor="grey", hatch="//", label=IDLE)
    for x, top, t in zip(xs, bottom + idle, g["step_time_s"], strict=True):
        ax.text(x, top + 1, milliseconds(t), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(int(b)) for b in g["batch_size"]], fontsize=8)
    ax.set_xlabel("batch size (samples per step)")
    ax.set_ylabel("share of the median step (%)")
    ax.set_ylim(0, 112)


def roofline(frame: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Per device: each point's achieved TFLOP/s against its arithmetic intensity, under the
    roofs min(matmul peak, bandwidth x intensity) of each precision measured."""
    ok = A.ok_rows(frame)
    need = ["intensity_flop_per_byte", "tflops", "peak_tflops", "peak_bandwidth_gb_per_s"]
    if any(c not in ok for c in need):
        return None
    ok = ok.dropna(subset=need)
    if ok.empty:
        return None
    # A panel per device: a colour per model, size and whatever else differs among the series.
    styles = SeriesStyles(ok, panel_fields=("device_name",))
    devices, fig, axes, keys = styles.panels(ok, column="device_name")
    for device, (ax,) in zip(devices, axes, strict=True):
        rows = ok[ok["device_name"] == device]
        low = float(rows["intensity_flop_per_byte"].min()) / 3
        high = float(rows["intensity_flop_per_byte"].max()) * 3
        bw = float(rows["peak_bandwidth_gb_per_s"].median())
        for precision, p_rows in rows.groupby("precision"):
            peak = float(p_rows["peak_tflops"].median())
            ridge = peak * 1e12 / (bw * 1e9)
            xs = np.geomspace(min(low, ridge / 3), max(high, ridge * 3), 100)
            ax.plot(
                xs, np.minimum(peak, bw * 1e9 * xs / 1e12), color="grey", linewidth=1, alpha=0.7
            )
            ax.annotate(
                f"{precision} roof {number(peak)}",
                (xs[-1], peak),
                fontsize=7,
                ha="right",
                va="bottom",
                color="grey",
            )
        for series, g in rows.groupby("series"):  # a line per series, through its batches
            g = g.sort_values("batch_size")
            ax.plot(
                g["intensity_flop_per_byte"],
                g["tflops"],
                markeredgecolor="black",
                markeredgewidth=0.4,
                linewidth=0.8,
                label="_",
                **styles.line(str(series)),
            )
        ax.set_xscale("log")
        readable_log(ax.xaxis)
        log_y(ax)
        ax.set_xlabel("arithmetic intensity (FLOP per minimum byte, log)")
        ax.set_ylabel("achieved TFLOP/s (log)")
        ax.set_title(device, fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
    save(
        fig,
        plots_dir,
        "roofline.png",
        "Roofline: achieved compute against arithmetic intensity",
        keys=keys,
    )
    return Chart(
        "roofline.png",
        "Roofline",
        "Each point's achieved TFLOP/s against its arithmetic intensity: the step's FLOPs over "
        "the minimum bytes it must move (every operator's inputs read once, outputs written "
        "once; a lower bound, so true intensity is lower still). The roofs are the measured "
        "matmul peak of each precision and the measured copy bandwidth (bandwidth x "
        "intensity); left of where they meet (the ridge) a step cannot reach the matmul peak.",
    )
