"""A tune folder's rows: tune_rows.jsonl, every measurement appended durably (marked with its
`tune_round`, and `tune_cut` where the deadline cut it short), and results.jsonl, what the
verdict and the report read: each configuration's deepest round's row (its longest
measurement), rewritten atomically after each measurement."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gpubench.config.spec import Point
from gpubench.store.results import ResultStore, replace_durably

FILE = "tune_rows.jsonl"


def read_measurements(run_dir: Path) -> list[dict[str, Any]]:
    """Every measurement so far, in order ([] where none)."""
    path = run_dir / FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def append(run_dir: Path, row: dict[str, Any]) -> None:
    """Append one measurement's row to tune_rows.jsonl, durably."""
    with open(run_dir / FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(row, allow_nan=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def deepest(measurements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per configuration: its deepest round's, in the order configurations were first
    measured; a measurement the deadline cut short (`tune_cut`) is never one of them."""
    by_point: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in measurements:
        if row.get("tune_cut"):
            continue
        key = Point.of(row).key()
        if key not in by_point or int(row["tune_round"]) >= int(by_point[key]["tune_round"]):
            by_point[key] = row
    return list(by_point.values())


def write_results(run_dir: Path, measurements: list[dict[str, Any]]) -> None:
    """Replace results.jsonl by the deepest row of each configuration, atomically and durably,
    and results.csv with it."""
    text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in deepest(measurements))
    replace_durably(run_dir / "results.jsonl", text)
    ResultStore(run_dir).write_csv()
