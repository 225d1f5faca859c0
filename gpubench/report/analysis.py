"""What the report derives from rows: throughput-optimal batch, latency floor, memory fit and the
predicted largest batch, OOM boundaries, and speedups over the CPU."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np
import pandas as pd

from gpubench.report import series as S
from gpubench.science.throughput import throughput_optimal_batch
from gpubench.store.row import IDENTITY

# Memory that grows by less than this fraction across the batches measured is called flat.
GROWTH = 0.01
# A point's whole identity but its device: speed options and seeds are never mixed (issue 13).
MATCH = [c for c in IDENTITY if c != "device"]


def real(value: object) -> TypeGuard[int | float]:
    """Whether `value` is a finite int or float, not a bool: a figure a file may hold as
    anything (null, text, NaN)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def ok_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows with status ok and a measured step time, sorted by batch size."""
    ok = frame[(frame["status"] == "ok") & frame["step_time_s"].notna()]
    return ok.sort_values("batch_size")


def latency_floor(step_time_s: Sequence[float]) -> float | None:
    """The shortest median step time measured, in seconds: the time a step costs however small
    the batch (launch and framework overhead, and weights-only work)."""
    values = [float(t) for t in step_time_s if t is not None and math.isfinite(float(t))]
    return min(values) if values else None


@dataclass(frozen=True)
class MemoryFit:
    """memory = fixed_bytes + per_sample_bytes x batch, least squares over the measured points."""

    fixed_bytes: float
    per_sample_bytes: float
    r2: float | None
    points: int
    batch_range: tuple[float, float]  # smallest and largest batch fitted

    def at(self, batch_size: float) -> float:
        return self.fixed_bytes + self.per_sample_bytes * batch_size

    def largest_batch(self, capacity_bytes: float | None) -> int | None:
        """The largest batch whose predicted memory fits `capacity_bytes`, or None when there is
        no capacity, or memory does not grow with the batch: by less than GROWTH of its size
        across the batches fitted (rounding, not a trend worth extrapolating)."""
        low, high = self.batch_range
        growth = self.per_sample_bytes * (high - low)
        if capacity_bytes is None or growth <= GROWTH * abs(self.at(high)):
            return None
        b = math.floor((capacity_bytes - self.fixed_bytes) / self.per_sample_bytes)
        return b if b >= 1 else None


def fit_memory(batch_sizes: Sequence[float], memory_bytes: Sequence[float]) -> MemoryFit | None:
    """The line through (batch, bytes), or None with fewer than two distinct batch sizes."""
    pairs = [
        (float(b), float(m))
        for b, m in zip(batch_sizes, memory_bytes, strict=True)
        if m is not None and math.isfinite(float(m))
    ]
    if len({b for b, _ in pairs}) < 2:
        return None
    x = np.array([b for b, _ in pairs])
    y = np.array([m for _, m in pairs])
    slope, intercept = np.polyfit(x, y, 1)
    residual = float(np.sum((y - (intercept + slope * x)) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = 1 - residual / total if total > 0 else None
    return MemoryFit(
        float(intercept), float(slope), r2, len(pairs), (float(x.min()), float(x.max()))
    )


def oom_batch(frame: pd.DataFrame) -> int | None:
    """The smallest batch size that ran out of memory among `frame`'s rows, or None."""
    oom = frame[frame["status"] == "oom"]["batch_size"].dropna()
    return int(oom.min()) if len(oom) else None


# The point's own device memory, most complete first. Never NVML's device-wide use
# (`nvml_peak_used_bytes`): it counts every process on the card, gpubench's parent among them
# (5.4-5.7 GiB of an H100 during a sweep, issue 28), and so is not what the point needs.
POINT_MEMORY = (
    "nvml_process_peak_used_bytes",  # the point's process: allocator reserved + CUDA context
    "torch_peak_reserved_bytes",
    "torch_peak_allocated_bytes",
)
# Every memory column the memory chart and compare read: the point's own, then the host's RSS.
MEMORY_COLUMNS = (*POINT_MEMORY, "host_peak_rss_bytes")


def memory_column(frame: pd.DataFrame) -> str | None:
    """The memory column the chart and the largest-batch prediction use: the point's own
    device memory (POINT_MEMORY), the first measured; None where none was (on the CPU)."""
    for col in POINT_MEMORY:
        if col in frame and frame[col].notna().any():
            return col
    return None


def speedup_table(frame: pd.DataFrame, cpu_threads: dict[str, int | None]) -> pd.DataFrame:
    """GPU rows joined with CPU rows of the same identity but the device (MATCH), with
    `speedup` = CPU step time / GPU step time, the matched rows' own `cpu_threads` (else the
    run's, from `cpu_threads`: run name to threads), `series` and `panel`."""
    ok = ok_rows(frame)
    cpu = ok[ok["device"] == "cpu"]
    gpu = ok[ok["device"] != "cpu"]
    columns = [
        *MATCH,
        "device_name",
        "cpu_name",
        "cpu_threads",
        "cpu_step_time_s",
        "gpu_step_time_s",
        "speedup",
        "series",
        "panel",
    ]
    if cpu.empty or gpu.empty:
        return pd.DataFrame(columns=columns)
    cpu = cpu.groupby([*MATCH, "device_name", "run"], as_index=False, dropna=False).agg(
        step_time_s=("step_time_s", "median"), row_threads=("torch_threads", "max")
    )
    cpu = cpu.rename(columns={"device_name": "cpu_name", "run": "cpu_run"})
    gpu = gpu.groupby([*MATCH, "device_name"], as_index=False, dropna=False)["step_time_s"].median()
    joined = gpu.merge(cpu, on=MATCH, suffixes=("_gpu", "_cpu"))
    joined = joined.rename(
        columns={"step_time_s_gpu": "gpu_step_time_s", "step_time_s_cpu": "cpu_step_time_s"}
    )
    joined["cpu_threads"] = [
        cpu_threads.get(run) if pd.isna(t) else int(t)
        for t, run in zip(joined["row_threads"], joined["cpu_run"], strict=True)
    ]
    joined["speedup"] = joined["cpu_step_time_s"] / joined["gpu_step_time_s"]
    joined = S.assign(joined, "series", without=("batch_size",))
    joined["panel"] = S.panel(joined)
    return joined[columns].sort_values(MATCH).reset_index(drop=True)


def series_summary(
    frame: pd.DataFrame, capacity: dict[tuple[str, str], int | None]
) -> pd.DataFrame:
    """One line per (model, series): best throughput, the throughput-optimal batch, the latency
    floor, the fitted memory line and the predicted largest batch, and the first OOM batch.
    `capacity` maps (run, device name) to the device's memory in bytes (runs.capacities)."""
    out = []
    for (model, size, series), group in frame.groupby(["model", "model_size", "series"], sort=True):
        ok = ok_rows(group)
        col = memory_column(ok)
        fit = fit_memory(ok["batch_size"], ok[col]) if col else None
        run, device = group["run"].iloc[0], group["device_name"].iloc[0]
        cap = capacity.get((run, device))
        out.append(
            {
                "model": model if frame["model_size"].nunique() == 1 else f"{model}/{size}",
                "series": series,
                "points_ok": len(ok),
                "best_samples_per_s": ok["samples_per_s"].max() if len(ok) else None,
                "throughput_optimal_batch": throughput_optimal_batch(
                    ok["batch_size"], ok["samples_per_s"]
                ),
                "latency_floor_s": latency_floor(ok["step_time_s"]),
                "memory_column": col,
                "memory_fixed_bytes": fit.fixed_bytes if fit else None,
                "memory_per_sample_bytes": fit.per_sample_bytes if fit else None,
                "capacity_bytes": cap,
                "predicted_max_batch": fit.largest_batch(cap) if fit else None,
                "oom_batch": oom_batch(group),
            }
        )
    return pd.DataFrame(out)
