"""pytest-benchmark JSON files as gpubench result rows, so `gpubench compare` can read them: a
`gpubench` fixture's row fields come from `extra_info`; any other benchmark's model is its full
name and its identity fields its parameters of the same names. Step times are its rounds'."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
        raise ResultsError(f"cannot read {str(path)!r}: {e.strerror}") from e
    except ValueError as e:
        raise ResultsError(f"{path}: not JSON ({e})") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ResultsError(f"{path}: not a pytest-benchmark JSON file (no 'benchmarks' list)")
    return [_row(bench, path, i) for i, bench in enumerate(doc["benchmarks"])]


def _row(bench: Any, path: Path, index: int) -> dict[str, Any]:
    stats = bench.get("stats") if isinstance(bench, dict) else None
    if not isinstance(stats, dict) or "median" not in stats:
        raise ResultsError(f"{path}: benchmark {index} has no stats")
    info = bench.get("extra_info") or {}
    params = bench.get("params") or {}
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update({k: v for k, v in info.items() if k in COLUMNS and k not in _DERIVED})
    for key in IDENTITY:
        if row[key] is None and key in params:
            row[key] = params[key]
    if row["model"] is None:
        row["model"] = bench.get("fullname") or bench.get("name")
    row["benchmark"] = bench.get("fullname") or bench.get("name")
    row["status"] = "ok"

    median = float(stats["median"])
    iterations = int(stats.get("iterations") or 1)
    row["step_time_s"] = median
    row["step_time_mean_s"] = stats.get("mean")
    row["step_time_iqr_s"] = stats.get("iqr")
    row["steps_measured"] = int(stats.get("rounds", 0)) * iterations
    if isinstance(stats.get("data"), list):
        row["step_times_s"] = [float(t) for t in stats["data"]]
    batch = row["samples_per_step"] or row["batch_size"]
    row["samples_per_s"] = batch / median if batch and median > 0 else None
    tokens = row["tokens_per_step"]
    row["tokens_per_s"] = tokens / median if tokens and median > 0 else None
    flops = row["flops_per_step"]
    row["tflops"] = flops / median / 1e12 if flops and median > 0 else None
    return row
