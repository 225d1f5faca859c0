"""Every ok row carries timing statistics, FLOPs, MFU, memory and breakdown (null only where the
device cannot give them); a missing NVML is one warning per sweep."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from gpubench import models
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.harness.point import measure_point
from gpubench.probes import calibration, nvml
from gpubench.run.context import RECALIBRATE_VARIABLE
from gpubench.run.sweep import run_sweep
from gpubench.store.row import COLUMNS

NVML_FIELDS = [
    "nvml_peak_used_bytes",
    "nvml_process_peak_used_bytes",
    "energy_j_per_step",
    "samples_per_j",
    "energy_method",
    "avg_power_w",
    "gpu_util_pct",
    "sm_clock_mhz",
    "temperature_c",
    "throttle_reasons",
    "nvml_sample_hz",
]


@pytest.mark.parametrize(("model", "prec"), [("mlp", "fp32"), ("transformer", "bf16")])
def test_cpu_row_carries_the_measurement(model: str, prec: str, quick_budget: Budget) -> None:
    point = Point(model, "tiny", "cpu", prec, "adamw", 8)
    row = measure_point(point, quick_budget)
    assert row["status"] == "ok", row["error"]
    assert set(row) == set(COLUMNS) | {"step_times_s", "profile"}  # profile: issue 15
    # timing
    assert row["steps_measured"] == 3 == len(row["step_times_s"])
    assert row["step_timer"] == "perf_counter"
    assert 0 < row["step_time_sum_s"] <= row["wall_time_s"]
    # compute: the counted step, its analytic check, and the fraction of this precision's
    # measured matmul roof; no MFU on a CPU (no datasheet peak: null, never a guess)
    w = models.build(model, "tiny")
    assert w.flops_per_sample is not None
    assert row["flops_analytic_per_step"] == w.flops_per_sample * 8
    assert row["flops_per_step"] == pytest.approx(row["flops_analytic_per_step"], rel=0.05)
    assert row["tflops"] == pytest.approx(row["flops_per_step"] / row["step_time_s"] / 1e12)
    peak = calibration.matmul_peak("cpu", prec)
    assert peak is not None and row["peak_tflops"] == peak.tflops
    assert row["matmul_roof_fraction"] == pytest.approx(row["tflops"] / peak.tflops)
    assert row["datasheet_peak_tflops"] is None and row["mfu"] is None
    assert row["flops_optimizer_per_step"] == 14 * row["parameters"]
    # memory: host RSS and the breakdown; no allocator peak or NVML on the CPU (null, not 0)
    assert row["host_peak_rss_bytes"] > 0
    assert row["memory_parameters_bytes"] == 4 * row["parameters"]
    assert row["memory_gradients_bytes"] == 4 * row["parameters"]
    assert row["memory_optimizer_bytes"] >= 8 * row["parameters"]
    assert row["memory_activations_bytes"] > 0
    for col in ["torch_peak_allocated_bytes", "memory_remainder_bytes", *NVML_FIELDS]:
        assert row[col] is None, col


def test_missing_nvml_leaves_fields_null_and_a_cpu_sweep_silent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without NVML a CPU-only sweep says nothing about it (no CUDA row has NVML fields to
    miss; issue 30), and its rows' NVML fields are null; a sweep that asks for CUDA warns
    (tests/test_nvml.py)."""
    real_reason = nvml.unavailable_reason()  # this machine's, as the calibration worker sees it
    monkeypatch.delenv(RECALIBRATE_VARIABLE)  # the sweep recalibrates, as a user's does
    monkeypatch.setattr(nvml, "_state", {"module": None, "reason": "test: no driver"})
    spec = SweepSpec(
        name="t",
        models=("mlp",),
        size="tiny",
        devices=("cpu",),
        batch_sizes=(4, 8),
        budget=Budget.fixed(steps=2, warmup_steps=1),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = run_sweep(spec, tmp_path / "run")
    assert [str(w.message) for w in caught if w.category is nvml.NvmlWarning] == []
    assert (frame["status"] == "ok").all()
    assert frame[NVML_FIELDS].isna().all().all()
    env = json.loads((tmp_path / "run" / "env.json").read_text())
    # env.json is captured in a calibration worker of its own (issue 28), a fresh interpreter
    # that this test's patch does not reach: it records the machine's NVML as it is
    assert env["nvml"]["available"] == (real_reason is None)
    peak = env["matmul_peaks"]["cpu"]["fp32"]
    assert peak["source"] == "measured"  # recalibrated at the sweep's start
    assert (frame["peak_tflops"] == peak["measured_tflops"]).all()
