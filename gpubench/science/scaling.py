"""Scaling efficiency of parallel points: a point's throughput over what its nproc = 1 point
would give if every rank added as much as that one process did.

Efficiency = X_n / ((W_n / W_1) * X_1), with X the global samples/s and W the world size (ranks
in all, nproc times the nodes). Under weak scaling each rank keeps its batch, so perfect scaling
multiplies throughput by the ranks; under strong scaling the global batch is split, and perfect
scaling divides the step time by them: the same formula in both.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from gpubench.store.row import IDENTITY


def baseline_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """The identity of `row`'s baseline: the same point at nproc = 1 (a null read back as NaN,
    or a number read back as a float, compares as it was written)."""
    return tuple(1 if c == "nproc" else _plain(row.get(c)) for c in IDENTITY)


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else (int(value) if value.is_integer() else value)
    return value


def _ok(row: dict[str, Any]) -> bool:
    value = row.get("samples_per_s")
    return row.get("status") == "ok" and isinstance(value, int | float) and value > 0


def efficiency(row: dict[str, Any], baseline: dict[str, Any]) -> float | None:
    """`row`'s scaling efficiency against `baseline` (both rows that ran), or None."""
    if not (_ok(row) and _ok(baseline)):
        return None
    ratio = (row.get("world_size") or row["nproc"]) / (baseline.get("world_size") or 1)
    return float(row["samples_per_s"]) / (ratio * float(baseline["samples_per_s"]))


def fill_efficiency(rows: Iterable[dict[str, Any]], known: Iterable[dict[str, Any]] = ()) -> None:
    """Set `scaling_efficiency` and `scaling_baseline_samples_per_s` on each parallel row of
    `rows` that has none yet and whose nproc = 1 point ran, among `rows` and `known`."""
    rows = list(rows)
    baselines = {
        baseline_key(r): r
        for r in (*known, *rows)
        if r.get("parallel", "none") != "none" and r.get("nproc") == 1 and _ok(r)
    }
    for row in rows:
        if row.get("parallel", "none") == "none" or row.get("scaling_efficiency") is not None:
            continue
        base = baselines.get(baseline_key(row))
        if base is None:
            continue
        value = efficiency(row, base)
        if value is not None:
            row["scaling_efficiency"] = value
            row["scaling_baseline_samples_per_s"] = base["samples_per_s"]
