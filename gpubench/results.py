"""The result row schema, the append-only results store, and loading runs into pandas."""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.spec import Point

STATUSES = ("ok", "oom", "diverged", "unsupported", "timeout", "error")

IDENTITY = [
    "model",
    "model_size",
    "device",
    "precision",
    "optimizer",
    "batch_size",
    "seed",
    "data",
    "compile",
    "channels_last",
    "cuda_graph",
]
IDENTITY += ["lr_scaling"]  # convergence runs: the learning-rate scaling rule (None otherwise)

# The flat columns of a row, in order (units in the names). A value that cannot be measured on
# this device is None, never 0 and never a guess. Raw series (step_times_s) live only in the JSONL.
COLUMNS = [
    *IDENTITY,
    "status",
    "error",
    "optimizer_impl",
    "parameters",
    "samples_per_step",
    "tokens_per_step",
    "warmup_steps",
    "warmup_time_s",
    "steps_measured",
    "step_time_s",
    "step_time_mean_s",
    "step_time_iqr_s",
    "step_time_p90_s",
    "step_time_cv",
    "step_time_ci_rel",
    "noisy",
    "wall_time_s",
    "samples_per_s",
    "tokens_per_s",
    "flops_per_step",
    "tflops",
    "mfu",
    "torch_peak_allocated_bytes",
    "torch_peak_reserved_bytes",
    "nvml_peak_used_bytes",
    "host_peak_rss_bytes",
    "energy_j_per_step",
    "avg_power_w",
    "gpu_util_pct",
    "loss_first",
    "loss_last",
    "eval_loss",
    "eval_accuracy",
    "steps_to_target",
    "time_to_target_s",
    "torch_threads",
    "point_time_s",
    # measurement detail (issue 3): how each number was obtained, and what it is checked against
    "step_timer",
    "step_time_device_sum_s",
    "flops_analytic_per_step",
    "flops_optimizer_per_step",
    "flops_method",
    "peak_tflops",
    "datasheet_peak_tflops",
    "memory_parameters_bytes",
    "memory_gradients_bytes",
    "memory_optimizer_bytes",
    "memory_activations_bytes",
    "memory_remainder_bytes",
    "nvml_process_peak_used_bytes",
    "samples_per_j",
    "energy_method",
    "sm_clock_mhz",
    "temperature_c",
    "throttle_reasons",
    "nvml_sample_hz",
    "compile_time_s",
    # convergence runs (mode = "convergence")
    "samples_to_target",
    "dataset",
    "dataset_sha256",
    "target_metric",
    "target",
    "lr",
    "lr_base",
    "lr_base_batch_size",
    "lr_warmup_steps",
    "eval_time_s",
    "diverged_at_step",
    "noise_scale_b_simple",
]
SERIES = ["step_times_s", "curve"]


def make_row(point: Point, status: str, **values: Any) -> dict[str, Any]:
    """A complete row: the point's identity, `status`, `values`, and None for the rest."""
    assert status in STATUSES, status
    unknown = set(values) - set(COLUMNS) - set(SERIES)
    assert not unknown, f"columns not in the schema: {sorted(unknown)}"
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(point.to_dict())
    row["status"] = status
    row.update({k: _clean(v) for k, v in values.items()})
    return row


def _clean(value: Any) -> Any:
    """JSON has no NaN or infinity: an unmeasurable float is stored as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class ResultStore:
    """The run folder's results.jsonl: one complete line per finished point, flushed and fsynced
    before the next point starts, so a crash loses at most the point in flight."""

    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "results.jsonl"

    def append(self, row: dict[str, Any]) -> None:
        line = json.dumps(row, allow_nan=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def write_json(self, name: str, obj: Any) -> Path:
        path = self.dir / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(obj, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        return path

    def write_csv(self) -> Path:
        path = self.dir / "results.csv"
        frame = load_results(self.dir)
        frame.drop(columns=[c for c in SERIES if c in frame], errors="ignore").to_csv(
            path, index=False
        )
        return path


class ResultsError(ValueError):
    """A results folder or file that cannot be read (a user's input: exit status 2)."""


def read_rows(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every complete row of `run_dir`'s results.jsonl. A torn last line (a crash mid-write) is
    skipped with a warning; a corrupt line elsewhere is an error naming file and line."""
    path = Path(run_dir) / "results.jsonl"
    if not path.is_file():
        raise ResultsError(f"no results.jsonl in {str(run_dir)!r}; expected a gpubench run folder")
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    rows = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            if i == len(lines):
                warnings.warn(f"{path}: skipping a torn last line {i}", stacklevel=2)
                continue
            raise ResultsError(f"{path}, line {i}: corrupt row ({e})") from e
        rows.append(row)
    return rows


def load_results(run_dir: str | Path) -> pd.DataFrame:
    """A run folder's rows as a DataFrame with the schema's columns first."""
    rows = read_rows(run_dir)
    frame = pd.DataFrame(rows)
    for col in COLUMNS:
        if col not in frame:
            frame[col] = None
    extra = [c for c in frame.columns if c not in COLUMNS]
    return frame[COLUMNS + extra]
