"""The convergence charts: loss curves against samples and wall time, and time-to-target against
batch size with the recommended batch (from a run's batch_analysis.json) marked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.report import analysis as A
from gpubench.report import series as S
from gpubench.report.figure import Chart, batch_axis, log_y, palette, panels_of, save
from gpubench.report.runs import Run, recommended_batch


def curve_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows that carry a loss curve: a non-empty `curve` list of {step, samples, time_s,
    train_loss, eval_loss} objects."""
    if "curve" not in frame:
        return frame.iloc[0:0]
    has = [isinstance(c, list) and len(c) > 0 for c in frame["curve"]]
    return frame[has]


def _points(curve: list[Any], x: str, y: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for p in curve:
        if not isinstance(p, dict):
            continue
        a, b = p.get(x), p.get(y)
        if A.real(a) and A.real(b):
            xs.append(float(a))
            ys.append(float(b))
    return xs, ys


def loss_curves(frame: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Train (solid) and eval (dashed) loss against samples seen (top) and wall time (bottom),
    a line per row, a column per model."""
    rows = curve_rows(frame)
    if rows.empty:
        return None
    # A line is one row: the whole identity, batch included; its label names what differs
    # among the lines (often just B=...), once for train and eval (the line style tells them).
    rows = S.assign(rows, "line", without=())
    names = S.labels(rows, "line", exclude=S.PANEL)
    colors = palette(names.values())
    models, fig, axes = panels_of(rows, rows_per_title=2)
    for model, (by_samples, by_time) in zip(models, axes, strict=True):
        for row in rows[rows["panel"] == model].to_dict("records"):
            label = names[row["line"]]
            color = colors[label]
            for ax, x in ((by_samples, "samples"), (by_time, "time_s")):
                xs, ys = _points(row["curve"], x, "train_loss")
                if xs:
                    ax.plot(xs, ys, "-", color=color, label=label, linewidth=1.2)
                xs, ys = _points(row["curve"], x, "eval_loss")
                if xs:
                    ax.plot(xs, ys, "--", color=color, linewidth=1, marker=".", label="_")
        by_samples.set_xlabel("samples seen")
        by_time.set_xlabel("wall time (s)")
        for ax in (by_samples, by_time):
            ax.set_ylabel("loss")
            log_y(ax)
            ax.grid(True, alpha=0.3)
    file = "loss_curves.png"
    save(fig, plots_dir, file, "Loss curves: train (solid) and held-out (dashed)")
    return Chart(
        file,
        "Loss curves",
        "Training loss (solid) and held-out loss (dashed, with dots at each evaluation) against "
        "samples seen (top) and wall-clock training time (bottom).",
    )


def _matches(entry: dict[str, Any], row: dict[str, Any]) -> bool:
    return all(
        str(entry[k]) == str(row[k])
        for k in ("model", "model_size", "device", "precision", "optimizer")
        if k in entry and entry[k] is not None
    )


def time_to_target(frame: pd.DataFrame, runs: Sequence[Run], plots_dir: Path) -> Chart | None:
    """Time to reach the target (loss or accuracy) against batch size, with each run's
    recommended batch."""
    ok = A.ok_rows(frame)
    ok = ok[ok["time_to_target_s"].notna()]
    if ok.empty:
        return None
    analyses = {r.name: r.analysis for r in runs}
    # A line is the whole identity but the batch and the seed: seeds are aggregated (the
    # median, with bars from the fastest to the slowest seed).
    ok = S.assign(ok, "line", without=("batch_size", "seed"))
    names = S.labels(ok, "line", exclude=S.PANEL)
    colors = palette(names.values())
    models, fig, axes = panels_of(ok)
    for model, (ax,) in zip(models, axes, strict=True):
        rows = ok[ok["panel"] == model]
        for line, g in rows.groupby("line"):
            label = names[str(line)]
            color = colors[label]
            t = g.groupby("batch_size")["time_to_target_s"]
            mid, low, high = t.median(), t.min(), t.max()
            ax.errorbar(
                mid.index,
                mid.values,
                yerr=[mid.values - low.values, high.values - mid.values],
                fmt="o-",
                capsize=3,
                color=color,
                label=label,
            )
            first = g.iloc[0].to_dict()
            for entry in analyses.get(first["run"], []):
                rec = recommended_batch(entry)
                if rec is not None and _matches(entry, first):
                    ax.axvline(
                        rec,
                        color=color,
                        linestyle="--",
                        linewidth=1.5,
                        label="recommended batch (least time to target)",
                    )
                    break
        batch_axis(ax, rows["batch_size"], "time to target (s, log scale)")
    file = "time_to_target.png"
    save(fig, plots_dir, file, "Wall-clock time to reach the target quality against batch size")
    return Chart(
        file,
        "Time to target",
        "Training time until the held-out metric (loss or accuracy) first reached the target: "
        "the median over seeds, bars from the fastest to the slowest seed. The dashed line is "
        "the recommended batch from the run's batch analysis.",
    )
