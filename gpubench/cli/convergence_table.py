"""The tables a convergence sweep prints: one row per point, and the batch-size analysis."""

from __future__ import annotations

from typing import Any

import pandas as pd
from rich.table import Table

from gpubench.cli.layout import plain_table
from gpubench.config.spec import model_label
from gpubench.store.wording import cell, number, seconds, times

# Both tables open with what was trained, how: _trained's cells.
_TRAINED = ("model", "device", "precision", "optimizer", "lr rule")
_POINT_HEADERS: tuple[str, ...] = (*_TRAINED, "batch", "seed", "lr", "status", "steps→target")
_POINT_HEADERS += ("time→target", "eval acc", "eval loss", "B_noise")
_BATCH_HEADERS: tuple[str, ...] = (*_TRAINED, "S_min", "B_crit", "B_noise", "recommended")
_BATCH_HEADERS += ("its time→target", "its steps→target", "seeds, spread", "throughput-opt")
_BATCH_HEADERS += ("largest fits",)


def _trained(r: dict[str, Any]) -> tuple[str, ...]:
    """A point's or a group's model, device, precision, optimizer and learning-rate rule."""
    model = model_label(r["model"], r["model_size"])
    return model, r["device"], r["precision"], r["optimizer"], str(r["lr_scaling"])


def points_table(frame: pd.DataFrame) -> Table:
    """Each convergence point: where it got to and when it met its target."""
    right = ("batch", "seed", "lr", "steps→target", "time→target", "eval acc", "eval loss")
    rows = (
        (
            *_trained(row),
            str(row["batch_size"]),
            str(row["seed"]),
            cell(row["lr"], ".3g"),
            _status(row),
            cell(row["steps_to_target"], ".0f"),
            seconds(row["time_to_target_s"]),
            cell(row["eval_accuracy"], ".3f"),
            cell(row["eval_loss"], ".3f"),
            _b_noise(row),
        )
        for row in frame.to_dict("records")
    )
    return plain_table("gpubench convergence", _POINT_HEADERS, rows, right)


def _b_noise(row: dict[str, Any]) -> str:
    """A point's B_noise: preconditioned where its optimizer gave one (Adam, AdamW), else raw,
    said which; an old row's extra-pass figure marked 'B_simple'; '' where none."""
    for column, kind in (
        ("noise_scale_b_noise_preconditioned", "precond."),
        ("noise_scale_b_noise", "raw"),
        ("noise_scale_b_simple", "B_simple"),
    ):
        value = row.get(column)
        if value is not None and pd.notna(value):
            return f"{cell(value, '.3g')} ({kind})"
    return ""


def _status(row: dict[str, Any]) -> str:
    """The row's status; an `ok` run that never reached its target says it missed it."""
    status = str(row["status"])
    if status != "ok" and row.get("error"):
        return f"{status}: {str(row['error'])[:50]}"
    target = row.get("target")
    if status == "ok" and pd.notna(target) and not pd.notna(row.get("steps_to_target")):
        return f"ok, missed target {number(target)}"
    return status


def batch_table(groups: list[dict[str, Any]]) -> Table:
    """Per model, optimizer and precision: the fit, the noise scale, and the batch sizes, the
    recommended one with its median time to target over seeds and their spread (max/min)."""
    rows = []
    for g in groups:
        rec = g.get("recommended_time_to_target_s") or {}
        spread, flag = rec.get("spread"), " (disagree)" if rec.get("seeds_disagree") else ""
        seeds = "" if spread is None else f", {times(spread)}{flag}"
        rows.append(
            (
                *_trained(g),
                cell(g["s_min"], ".3g"),
                cell(g["b_crit"], ".3g"),
                _group_b_noise(g),
                cell(g["recommended_batch_size"], "d"),
                seconds(rec.get("median")),
                cell(rec.get("median_steps"), ".0f"),  # an analysis before it: empty
                f"{rec.get('runs', '')}{seeds}",
                cell(g["throughput_optimal_batch_size"], "d"),
                cell(g["largest_batch_fits"], "d"),
            )
        )
    return plain_table("batch size analysis (batch_analysis.json)", _BATCH_HEADERS, rows)


def _group_b_noise(g: dict[str, Any]) -> str:
    """A series' B_noise with its kind (batch_analysis._noise), or an old analysis's
    B_simple marked so; '' where none."""
    if g.get("b_noise") is not None:
        kind = "precond." if g.get("b_noise_kind") == "preconditioned" else "raw"
        return f"{cell(g['b_noise'], '.3g')} ({kind})"
    old = g.get("noise_scale_b_simple")
    return "" if old is None else f"{cell(old, '.3g')} (B_simple)"


def comparisons(groups: list[dict[str, Any]]) -> list[str]:
    """One line per group: the recommendation against the other batch sizes, and why a fit
    failed where it did."""
    lines = []
    for g in groups:
        fit = "" if g["fit"]["valid"] else f" (no S_min/B_crit fit: {g['fit']['reason']})"
        name = " ".join(_trained(g)[:4])
        lines.append(f"{name} lr:{g['lr_scaling']}: {g['comparison']}{fit}")
    return lines
