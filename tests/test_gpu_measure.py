"""The CUDA and NVML paths of a measured row (run on a GPU machine; skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

from gpubench.config.spec import Budget, Point
from gpubench.harness.point import measure_point
from gpubench.probes import datasheet, energy, nvml

pytestmark = pytest.mark.gpu

BUDGET = Budget(warmup_steps=5, warmup_min_s=0.5, min_time_s=1.0, max_time_s=3.0)


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    torch.cuda.empty_cache()


@pytest.mark.parametrize("model", ["mlp", "cnn", "transformer"])
def test_cuda_row_timing_flops_and_memory(model: str) -> None:
    row = measure_point(Point(model, "base", "cuda", "bf16", "adamw", 32), BUDGET)
    assert row["status"] == "ok", row["error"]
    assert row["step_timer"] == "cuda_event"
    agreement = abs(row["step_time_sum_s"] - row["wall_time_s"]) / row["wall_time_s"]
    assert agreement < 0.02
    assert row["flops_per_step"] == pytest.approx(row["flops_analytic_per_step"], rel=0.05)
    assert row["peak_tflops"] > 0 and 0 < row["matmul_roof_fraction"] < 1
    sheet = datasheet.peak_tflops(torch.cuda.get_device_name(), "bf16")
    assert row["mfu"] == (None if sheet is None else pytest.approx(row["tflops"] / sheet))
    assert row["torch_peak_reserved_bytes"] >= row["torch_peak_allocated_bytes"] > 0
    assert row["memory_remainder_bytes"] > 0


def test_nvml_fields_and_energy_are_plausible() -> None:
    if nvml.unavailable_reason() is not None:
        pytest.skip(nvml.unavailable_reason())
    # a default point's 1 s window: too short for the counter alone (it moves every 100 ms on
    # an H100, a bound of 3-5%), so the figure is whichever of counter and power integral
    # states the smaller bound, within MAX_STATED_ERROR_REL
    row = measure_point(Point("transformer", "base", "cuda", "bf16", "adamw", 16), BUDGET)
    assert row["nvml_sample_hz"] >= 0.9 / nvml.DEFAULT_INTERVAL_S  # the grid keeps its rate
    assert row["nvml_peak_used_bytes"] >= row["torch_peak_reserved_bytes"]
    if row["nvml_process_peak_used_bytes"] is not None:  # None under a foreign PID namespace
        assert row["nvml_process_peak_used_bytes"] >= row["torch_peak_reserved_bytes"]
    assert row["energy_method"] in ("counter", "power_integral"), row["energy_note"]
    assert 0 <= row["energy_error_rel"] <= energy.MAX_STATED_ERROR_REL
    if row["energy_method"] == "counter":
        assert row["energy_counter_resolution_s"] > 0
    power_times_time = row["avg_power_w"] * row["wall_time_s"] / row["steps_measured"]
    assert row["energy_j_per_step"] == pytest.approx(power_times_time, rel=0.2)
    assert row["samples_per_j"] == pytest.approx(16 / row["energy_j_per_step"])
    assert row["gpu_util_pct"] > 50 and row["sm_clock_mhz"] > 0 and row["temperature_c"] > 0
    assert row["throttle_reasons"] is not None
