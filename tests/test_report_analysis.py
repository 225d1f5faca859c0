from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from report_fixture import H100, GiB, cpu_gpu_runs

from gpubench.report import analysis as A
from gpubench.report.runs import capacities, combine, load_runs
from gpubench.science.throughput import throughput_optimal_batch


def test_throughput_optimal_batch_is_the_smallest_within_five_percent_of_the_best() -> None:
    batches = [16, 64, 256, 1024]
    assert throughput_optimal_batch(batches, [100, 300, 960, 1000]) == 256
    assert throughput_optimal_batch(batches, [100, 300, 940, 1000]) == 1024
    # The best need not be the largest batch; nulls are ignored.
    assert throughput_optimal_batch(batches, [100, 1000, 990, float("nan")]) == 64
    assert throughput_optimal_batch(batches, [float("nan")] * 4) is None


def test_latency_floor_is_the_shortest_measured_step() -> None:
    assert A.latency_floor([0.004, 0.003, 0.005, float("nan")]) == 0.003
    assert A.latency_floor([]) is None


def test_memory_fit_recovers_a_known_line_and_predicts_the_largest_batch() -> None:
    fixed, per_sample = 1.5 * GiB, 20e6
    batches = [16, 64, 256, 1024]
    fit = A.fit_memory(batches, [fixed + per_sample * b for b in batches])
    assert fit is not None
    assert fit.fixed_bytes == pytest.approx(fixed, rel=1e-9)
    assert fit.per_sample_bytes == pytest.approx(per_sample, rel=1e-9)
    assert fit.r2 == pytest.approx(1.0)
    capacity = 80 * GiB
    largest = fit.largest_batch(capacity)
    assert largest == int((capacity - fixed) // per_sample)
    assert fit.at(largest) <= capacity < fit.at(largest + 1)
    assert fit.largest_batch(None) is None
    assert A.fit_memory([16, 16], [1.0, 2.0]) is None  # one batch size: no line


def test_memory_that_does_not_grow_predicts_no_largest_batch() -> None:
    fit = A.fit_memory([16, 64, 256], [GiB, GiB, GiB])
    assert fit is not None and fit.per_sample_bytes == pytest.approx(0, abs=1e-3)
    assert fit.largest_batch(80 * GiB) is None


def test_speedup_table_matches_gpu_and_cpu_points(tmp_path: Path) -> None:
    runs = load_runs(cpu_gpu_runs(tmp_path))
    frame = combine(runs)
    table = A.speedup_table(frame, {r.name: r.cpu_threads() for r in runs})
    # Both precisions at every batch, except the GPU fp32 point at 4096 that ran out of memory.
    assert len(table) == 2 * 5 - 1
    assert set(table["cpu_threads"]) == {2}
    assert all(table["device_name"] == f"cuda ({H100['name']})")
    row = table[(table["precision"] == "bf16") & (table["batch_size"] == 1024)].iloc[0]
    ok = frame[frame["status"] == "ok"]
    cpu = ok[(ok["device"] == "cpu") & (ok["precision"] == "bf16") & (ok["batch_size"] == 1024)]
    gpu = ok[(ok["device"] == "cuda") & (ok["precision"] == "bf16") & (ok["batch_size"] == 1024)]
    expected = cpu["step_time_s"].iloc[0] / gpu["step_time_s"].iloc[0]
    assert row["speedup"] == pytest.approx(expected)
    assert row["speedup"] > 1


def test_series_summary_reports_oom_boundary_and_predicted_largest_batch(tmp_path: Path) -> None:
    runs = load_runs(cpu_gpu_runs(tmp_path))
    frame = combine(runs)
    capacity = capacities(runs)
    s = A.series_summary(frame, capacity)

    def one(device: str, precision: str) -> pd.Series:
        hit = s[[k.startswith(device) and f" | {precision} | " in k for k in s["series"]]]
        assert len(hit) == 1
        return hit.iloc[0]

    gpu32 = one(f"cuda ({H100['name']})", "fp32")
    assert gpu32["oom_batch"] == 4096 and gpu32["memory_column"] == "nvml_process_peak_used_bytes"
    # The fixture's NVML line for the point's process is 1.1 x (2 GiB + 20 MB x B) + 500 MiB, the
    # prediction follows it; device-wide NVML (the parent's 5.5 GiB with it) would predict less.
    fixed, per_sample = 1.1 * 2 * GiB + 500 * 2**20, 1.1 * 20e6
    assert gpu32["predicted_max_batch"] == pytest.approx((80 * GiB - fixed) // per_sample, abs=1)
    cpu = one("cpu (Test CPU)", "fp32")
    assert pd.isna(cpu["predicted_max_batch"])  # no memory measured on the CPU: no prediction


def test_text_columns_stay_text_when_runs_are_combined() -> None:
    published = Path(__file__).resolve().parent.parent / "results" / "20261122-cpu-quick"
    frame = combine(load_runs([published]))
    ok = frame[frame["status"] == "ok"]
    assert set(ok["step_timer"]) == {"perf_counter"}
    assert all(str(m).startswith("FlopCounterMode") for m in ok["flops_method"])
    assert ok["samples_per_s"].dtype.kind == "f"  # numbers are still numbers
