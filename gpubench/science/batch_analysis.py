"""Which batch size trains fastest: steps-to-target against batch size, fitted with McCandlish
et al.'s (2018) S = S_min (1 + B_crit / B), and the measured training time to target over seeds.

For each series of a convergence run (configurations that differ only in batch size and seed:
model, size, device, precision, optimizer, lr scaling and every other identity field) this
finds the recommended batch size: the fastest to target by science.target_time, the least
median training time to target over seeds among the batch sizes whose every seed reached it
(the verdict's "fastest to target" is the same notion). It compares it with the
throughput-optimal batch size (the smallest within 5% of the best samples/s) and with the
largest batch that fits (known only where a larger one ran out of memory). Beside B_crit it
states the gradient noise scale B_noise the series' own training steps measured
(science.fastest_to_target.noise_of: preconditioned under Adam and AdamW, else raw; an old
folder's extra-pass `noise_scale_b_simple` stays readable under its own name). The result is
written to the run folder as batch_analysis.json.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpubench.config.keys import CONFIGURATION, configuration
from gpubench.science import target_time
from gpubench.science.curve import spread
from gpubench.science.fastest_to_target import noise_of
from gpubench.science.partition import grouped
from gpubench.science.target_time import TargetTime
from gpubench.science.throughput import throughput_optimal_batch
from gpubench.store import wording
from gpubench.store.batch_analysis_record import BatchAnalysisRecord
from gpubench.store.results import load_results

# The columns an entry is keyed by: a configuration's, less its batch size.
GROUP = [c for c in CONFIGURATION if c != "batch_size"]


def fit_hyperbola(batch_sizes: list[float], steps: list[float]) -> dict[str, Any]:
    """Fit S = S_min (1 + B_crit / B), i.e. S = a + b / B with a = S_min and b = S_min B_crit,
    by least squares on relative errors (weights 1/S). Returns s_min (steps), b_crit (samples),
    e_min = S_min B_crit (samples: the fewest samples to target), rel_rmse, and `valid` with a
    `reason` where the data do not fit the form (fewer than two batch sizes, or a or b < 0)."""
    b = np.asarray(batch_sizes, dtype=float)
    s = np.asarray(steps, dtype=float)
    out: dict[str, Any] = {"batch_sizes": b.tolist(), "steps": s.tolist()}
    if len(np.unique(b)) < 2:
        return {**out, "valid": False, "reason": "needs steps-to-target at two batch sizes"}
    design = np.stack([np.ones_like(b), 1.0 / b], axis=1) / s[:, None]
    (a, k), *_ = np.linalg.lstsq(design, np.ones_like(s), rcond=None)
    fitted = a + k / b
    rel_rmse = float(np.sqrt(np.mean(((fitted - s) / s) ** 2)))
    out.update(rel_rmse=rel_rmse, s_min=float(a), b_crit=None, e_min=float(k))
    if a <= 0:
        return {**out, "valid": False, "reason": "steps keep falling as 1/B (S_min <= 0)"}
    if k < 0:
        return {**out, "valid": False, "reason": "steps grow with the batch size (B_crit < 0)"}
    return {**out, "b_crit": float(k / a), "valid": True, "reason": None}


def _finite(values: pd.Series) -> list[float]:
    return [float(v) for v in values if v is not None and not pd.isna(v)]


def _median(values: pd.Series) -> float | None:
    v = _finite(values)
    return float(np.median(v)) if v else None


def _column(rows: pd.DataFrame, name: str) -> float | None:
    """The median of `rows`' column `name` (None where absent: rows of another era)."""
    return _median(rows[name]) if name in rows else None


def _noise(rows: pd.DataFrame) -> dict[str, Any]:
    """B_noise over a series' rows (fastest_to_target.noise_of) with its interval, kind and
    where it was taken (None each where no row measured it), and an old folder's B_simple."""
    found = noise_of(rows.to_dict("records"))
    high = None if found is None or found.high is None or math.isinf(found.high) else found.high
    return {
        "b_noise": None if found is None else found.b_noise,
        "b_noise_low": None if found is None else found.low,
        "b_noise_high": high,
        "b_noise_kind": None if found is None else found.kind,
        "b_noise_where": None if found is None else found.where,
        "noise_scale_b_simple": _column(rows, "noise_scale_b_simple"),  # before issue 51
    }


def _per_batch(rows: pd.DataFrame, times: dict[int, TargetTime]) -> list[dict[str, Any]]:
    """Per batch size of one series: its runs, steps and samples to target with their spread
    over seeds, and its time to target (`times`, science.target_time's summary)."""
    out = []
    for bs, g in rows.groupby("batch_size"):
        steps = _finite(g["steps_to_target"])
        out.append(
            {
                "batch_size": int(bs),  # type: ignore[call-overload]
                "runs": len(g),
                "statuses": g["status"].value_counts().to_dict(),
                "reached": len(steps),
                "steps_to_target": spread(steps),
                "samples_to_target": spread(_finite(g["samples_to_target"])),
                "time_to_target_s": times[int(bs)].as_dict(),  # type: ignore[call-overload]
                "step_time_s": _median(g["step_time_s"]),
                "samples_per_s": _median(g["samples_per_s"]),
                "noise_scale_b_noise": _column(g, "noise_scale_b_noise"),
                "noise_scale_b_noise_preconditioned": _column(
                    g, "noise_scale_b_noise_preconditioned"
                ),
                "noise_scale_b_simple": _column(g, "noise_scale_b_simple"),  # old rows
                "lr": _median(g["lr"]),
            }
        )
    return out


def _largest_fitting(frame: pd.DataFrame, key: dict[str, Any]) -> dict[str, Any]:
    """The largest batch that ran, below the smallest that ran out of memory, over every row of
    the run with the same model, size, device, precision and optimizer."""
    same = frame
    for col in ("model", "model_size", "device", "precision", "optimizer"):
        same = same[same[col] == key[col]]
    ooms = sorted(int(b) for b in same.loc[same["status"] == "oom", "batch_size"])
    ran = sorted(int(b) for b in same.loc[same["status"].isin(["ok", "diverged"]), "batch_size"])
    tried = max(ran) if ran else None
    if not ooms:
        return {"largest_batch_fits": None, "largest_batch_ran": tried, "oom_batch_sizes": []}
    below = [b for b in ran if b < ooms[0]]
    return {
        "largest_batch_fits": max(below) if below else None,
        "largest_batch_ran": tried,
        "oom_batch_sizes": ooms,
    }


def _comparison(entry: dict[str, Any], times: dict[int, TargetTime]) -> str:
    rec = entry["recommended_batch_size"]
    if rec is None:
        return "no batch size reached the target in every seed; no recommendation"
    best = times[rec]
    parts = [f"B={rec} reaches the target in the least training time, {best.describe()}"]
    for label, b in (
        ("throughput-optimal", entry["throughput_optimal_batch_size"]),
        ("largest that fits", entry["largest_batch_fits"]),
    ):
        if b is None:
            parts.append(f"{label}: unknown")
        elif b == rec:
            parts.append(f"{label} B={b} is the same")
        elif b in times and times[b].complete and best.median_s:
            ratio = times[b].median_s / best.median_s  # type: ignore[operator]
            parts.append(f"{label} B={b} takes {wording.times(ratio)} as long (median)")
        elif b in times:
            t = times[b]
            parts.append(f"{label} B={b} reached the target in {t.reached} of {t.runs} seeds")
        else:
            parts.append(f"{label} B={b} did not run to the target")
    return "; ".join(parts)


def analyse(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """One entry per series of convergence rows (rows without lr_scaling are speed rows), in
    the order of each series' first row."""
    summaries = target_time.summarise(frame.to_dict("records"))
    series = grouped(summaries, lambda s: configuration(s.row, "batch_size"))
    entries = []
    for summaries in series.values():
        times = {s.batch_size: s for s in summaries}
        rows = pd.DataFrame([r for s in summaries for r in s.rows])
        key = {c: summaries[0].row.get(c) for c in GROUP}
        per_batch = _per_batch(rows, times)
        full = [p for p in per_batch if times[p["batch_size"]].complete]
        fit = fit_hyperbola(
            [p["batch_size"] for p in full], [p["steps_to_target"]["mean"] for p in full]
        )
        rec = target_time.fastest(summaries)
        entry = {
            **key,
            "dataset": _first(rows["dataset"]),
            "target_metric": _first(rows["target_metric"]),
            "target": _first(rows["target"]),
            "seeds": sorted({int(s) for s in rows["seed"]}),
            "fit": fit,
            "s_min": fit["s_min"] if fit["valid"] else None,
            "b_crit": fit["b_crit"] if fit["valid"] else None,
            **_noise(rows),
            "recommended_batch_size": rec.batch_size if rec else None,
            "recommended_time_to_target_s": rec.as_dict() if rec else None,
            "throughput_optimal_batch_size": throughput_optimal_batch(
                [p["batch_size"] for p in per_batch],
                [p["samples_per_s"] or math.nan for p in per_batch],
            ),
            **_largest_fitting(frame, key),
            "per_batch": per_batch,
        }
        entry["comparison"] = _comparison(entry, times)
        entries.append(entry)
    return entries


def _first(values: pd.Series) -> Any:
    present = values.dropna()
    return present.iloc[0] if len(present) else None


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating | float):
        return float(obj) if math.isfinite(obj) else None
    return obj


def write_analysis(run_dir: str | Path) -> Path:
    """Analyse a run folder's convergence rows and write batch_analysis.json there."""
    entries = analyse(load_results(run_dir))
    return BatchAnalysisRecord(tuple(_jsonable(entries))).write(Path(run_dir))
