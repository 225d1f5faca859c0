"""pytest-benchmark JSON files as gpubench result rows, so `gpubench compare` can read them: a
`gpubench` fixture's row fields come from `extra_info`; any other benchmark's model is its full
name and its identity fields its parameters of the same names. Step times are its rounds'."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpubench.store import row_schema, shaped
from gpubench.store.results import ResultsError
from gpubench.store.row import COLUMNS, IDENTITY

# Columns whose value in extra_info is only true for the recorded run's own statistics; they are
# recomputed from pytest-benchmark's stats so that a row always agrees with the file's numbers.
_DERIVED = {
    "step_time_s",
    "step_time_mean_s",
    "step_time_iqr_s",
    "steps_measured",
    "samples_per_s",
    "tokens_per_s",
    "tflops",
}


def rows_from_benchmark_json(path: str | Path) -> list[dict[str, Any]]:
    """One gpubench row (results.COLUMNS, plus `benchmark` and the raw `step_times_s` when the
    file holds them: --benchmark-json always does, --benchmark-save/autosave only with
    --benchmark-save-data) per benchmark in a pytest-benchmark JSON file. Times in seconds.

    Raises ResultsError when the file is missing or is not pytest-benchmark JSON.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ResultsError(f"cannot read {str(path)!r}: {e.strerror}") from None
    except (ValueError, RecursionError) as e:
        raise ResultsError(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ResultsError(f"{path}: not a pytest-benchmark JSON file (no 'benchmarks' list)")
    return [_row(bench, path, i) for i, bench in enumerate(doc["benchmarks"])]


def _row(bench: Any, path: Path, index: int) -> dict[str, Any]:
    where = f"{path}: benchmark {index}"
    stats = bench.get("stats") if isinstance(bench, dict) else None
    if not isinstance(stats, dict) or "median" not in stats:
        raise ResultsError(f"{where} has no stats")
    info = _object(bench.get("extra_info"), f"{where}: extra_info")
    params = _object(bench.get("params"), f"{where}: params")
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update({k: v for k, v in info.items() if k in COLUMNS and k not in _DERIVED})
    for key in IDENTITY:
        if row[key] is None and key in params:
            row[key] = params[key]
    name = bench.get("fullname") or bench.get("name")
    if row["model"] is None:
        row["model"] = name
    row["benchmark"] = name
    row["status"] = "ok"
    if (odd := row_schema.problem(row, values=False)) is not None:
        raise ResultsError(f"{where}: {odd}")

    def number(key: str) -> float | None:
        return _number(stats.get(key), f"{where}: stats.{key}")

    median = number("median")
    if median is None:
        raise ResultsError(f"{where}: stats.median is null, not a number")
    iterations = int(number("iterations") or 1)
    row["step_time_s"] = median
    row["step_time_mean_s"] = number("mean")
    row["step_time_iqr_s"] = number("iqr")
    row["steps_measured"] = int(number("rounds") or 0) * iterations
    if isinstance(stats.get("data"), list):
        data = stats["data"]
        row["step_times_s"] = [_number(t, f"{where}: stats.data[{i}]") for i, t in enumerate(data)]
    batch = row["samples_per_step"] or row["batch_size"]
    row["samples_per_s"] = batch / median if batch and median > 0 else None
    tokens = row["tokens_per_step"]
    row["tokens_per_s"] = tokens / median if tokens and median > 0 else None
    flops = row["flops_per_step"]
    row["tflops"] = flops / median / 1e12 if flops and median > 0 else None
    return row


def _object(value: Any, where: str) -> dict[str, Any]:
    """`value` where it is an object ({} for null); ResultsError naming `where` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ResultsError(f"{where} is {shaped.shown(value)}, not an object")
    return value


def _number(value: Any, where: str) -> float | None:
    """`value` where it is a finite number (None where it is null); ResultsError naming
    `where` (the file, the benchmark and the key) otherwise."""
    if value is None:
        return None
    if (why := shaped.problem(value, float, where)) is not None:
        raise ResultsError(why)
    return float(value)
