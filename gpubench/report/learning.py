"""The convergence charts: loss curves against samples and wall time, and time-to-target against
batch size with the recommended batch (from a run's batch_analysis.json) marked."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.report import analysis as A
from gpubench.report.figure import Chart, batch_axis, log_y, palette, panels, save
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
        if isinstance(a, int | float) and isinstance(b, int | float) and math.isfinite(b):
            xs.append(float(a))
            ys.append(float(b))
    return xs, ys


def loss_curves(frame: pd.DataFrame, plots_dir: Path) -> Chart | None:
    """Train (solid) and eval (dashed) loss against samples seen (top) and wall time (bottom),
    a line per row, a column per model."""
    rows = curve_rows(frame)
    if rows.empty:
        return None
    labels = [f"{s} B={int(b)}" for s, b in zip(rows["series"], rows["batch_size"], strict=True)]
    rows = rows.assign(label=labels)
    colors = palette(rows["label"])
    models = sorted(rows["model"].unique())
    fig, axes = panels(models, rows_per_title=2)
    for model, (by_samples, by_time) in zip(models, axes, strict=True):
        for row in rows[rows["model"] == model].to_dict("records"):
            color = colors[row["label"]]
            for ax, x in ((by_samples, "samples"), (by_time, "time_s")):
                xs, ys = _points(row["curve"], x, "train_loss")
                if xs:
                    ax.plot(xs, ys, "-", color=color, label=row["label"], linewidth=1.2)
                xs, ys = _points(row["curve"], x, "eval_loss")
                if xs:
                    ax.plot(
                        xs,
                        ys,
                        "--",
                        color=color,
                        linewidth=1,
                        marker=".",
                        label=f"{row['label']} (eval)",
                    )
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
    colors = palette(frame["series"])
    models = sorted(ok["model"].unique())
    fig, axes = panels(models)
    for model, (ax,) in zip(models, axes, strict=True):
        rows = ok[ok["model"] == model]
        for series, g in rows.groupby("series"):
            color = colors[str(series)]
            t = g.groupby("batch_size")["time_to_target_s"].median()
            ax.plot(t.index, t.values, "o-", color=color, label=str(series))
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
        batch_axis(ax, rows["batch_size"])
        log_y(ax)
        ax.set_ylabel("time to target (s, log scale)")
    file = "time_to_target.png"
    save(fig, plots_dir, file, "Wall-clock time to reach the target quality against batch size")
    return Chart(
        file,
        "Time to target",
        "Training time until the held-out metric (loss or accuracy) first reached the target. "
        "The dashed line is the recommended batch from the run's batch analysis.",
    )
