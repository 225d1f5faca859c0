"""The CUDA and NVML paths of a measured row (run on a GPU machine; skipped without CUDA).

The timing figures of real hardware (CUDA events against the host clock, a point against the
measured matmul roof, the NVML sampler's rate and the energy bound that rests on it) are asserted
only where the test has the GPU to itself (tests/gpu_alone.py); what holds under any sharing is
asserted always."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import statistics
import time

import gpu_alone
import pytest
import torch

from gpubench.config.spec import Budget, Point
from gpubench.harness.point import measure_point
from gpubench.probes import datasheet, energy, nvml

BUDGET = Budget(warmup_steps=5, warmup_min_s=0.5, min_time_s=1.0, max_time_s=3.0)
# cudaEventElapsedTime's resolution (CUDA runtime API: "around 0.5 microseconds")
EVENT_RESOLUTION_S = 0.5e-6


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    torch.cuda.empty_cache()


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["mlp", "cnn", "transformer"])
def test_cuda_row_timing_flops_and_memory(model: str, request: pytest.FixtureRequest) -> None:
    row = measure_point(Point(model, "base", "cuda", "bf16", "adamw", 32), BUDGET)
    assert row["status"] == "ok", row["error"]
    assert row["step_timer"] == "cuda_event"
    # The events mark each step inside the window the host clock times: their sum never exceeds
    # it. Alone, little else is in it; shared, each window also holds the waits for another
    # process's kernels and for a core, which the events do not see.
    slack = EVENT_RESOLUTION_S * row["steps_measured"]
    assert row["step_time_sum_s"] <= row["wall_time_s"] + slack
    alone = gpu_alone.workers(request.config) == 1
    if alone:
        agreement = (row["wall_time_s"] - row["step_time_sum_s"]) / row["wall_time_s"]
        assert agreement < 0.02
    assert row["flops_per_step"] == pytest.approx(row["flops_analytic_per_step"], rel=0.05)
    assert row["peak_tflops"] > 0
    assert row["matmul_roof_fraction"] == pytest.approx(row["tflops"] / row["peak_tflops"])
    if alone:  # a roof calibrated while other processes had the GPU is lower than the GPU's
        assert 0 < row["matmul_roof_fraction"] < 1
    sheet = datasheet.peak_tflops(torch.cuda.get_device_name(), "bf16")
    assert row["mfu"] == (None if sheet is None else pytest.approx(row["tflops"] / sheet))
    assert sheet is None or row["tflops"] < sheet  # the datasheet's peak, however shared
    assert row["torch_peak_reserved_bytes"] >= row["torch_peak_allocated_bytes"] > 0
    assert row["memory_remainder_bytes"] > 0


def counter_period_s(device: nvml.Device, updates: int = 6, limit_s: float = 10.0) -> float:
    """The energy counter's update period on this GPU, read now: the median gap between its
    next `updates` changes (seen within `limit_s` seconds, or the test fails)."""
    read = device.nvml.nvmlDeviceGetTotalEnergyConsumption
    changed: list[float] = []
    last, start = read(device.handle), time.perf_counter()
    while len(changed) < updates:
        now = read(device.handle)
        if now != last:
            changed.append(time.perf_counter())
            last = now
        assert time.perf_counter() - start < limit_s, f"the energy counter moved {len(changed)}x"
    return statistics.median(b - a for a, b in itertools.pairwise(changed))


def counter_window_s(period_s: float, interval_s: float, bound: float) -> float:
    """The shortest window D whose energy from the counter (probes.energy.from_counter) states
    an error within `bound`, readings on the sampler's grid of `interval_s` slots (one at a
    random point of each, so two readings are at most 2 * interval_s apart). The first update
    comes within a period of the window's start and is read within 2 * interval_s; the last
    comes within a period of its end and is read by then: their span is at least
    D - 2 * period_s - 2 * interval_s. Each of the two times is uncertain by the gap before
    its reading, 2 * interval_s at most: the error is at most
    4 * interval_s / (D - 2 * period_s - 2 * interval_s) <= bound."""
    return 2 * (period_s + interval_s) + 4 * interval_s / bound


def test_the_derived_window_holds_the_counters_bound_on_the_grid() -> None:
    # The window above, with readings placed as the sampler places them and a counter that
    # moves every 99.9 ms (an H100's) from a random phase: from_counter's bound stays within.
    rng = random.Random(0)
    period, interval, bound = 0.0999, nvml.DEFAULT_INTERVAL_S, energy.MAX_STATED_ERROR_REL
    window = counter_window_s(period, interval, bound)
    slots = [k for k in range(1, math.ceil(window / interval)) if k * interval < window]
    worst = 0.0
    for _ in range(2000):
        phase = rng.random() * period
        grid = [(k + rng.random()) * interval for k in slots]
        times = [0.0, *(t for t in grid if t < window), window]
        counter = [700.0 * period * math.floor((t + phase) / period) for t in times]
        got = energy.from_counter(times, counter, max_error_rel=1.0)
        assert got.error_rel is not None
        worst = max(worst, got.error_rel)
    assert worst <= bound


@pytest.mark.gpu
def test_nvml_fields_and_energy_are_plausible(request: pytest.FixtureRequest) -> None:
    if nvml.unavailable_reason() is not None:
        pytest.skip(nvml.unavailable_reason())
    budget = BUDGET
    device = nvml.Device(torch.cuda.current_device())
    if device.energy_counter:  # else the power integral's bound, which no window length sets
        # the sampler's window spans the measured windows: min_time_s of them at least
        period = counter_period_s(device)
        window = counter_window_s(period, nvml.DEFAULT_INTERVAL_S, energy.MAX_STATED_ERROR_REL)
        budget = dataclasses.replace(
            BUDGET, min_time_s=window, max_time_s=max(BUDGET.max_time_s, 2 * window)
        )
    row = measure_point(Point("transformer", "base", "cuda", "bf16", "adamw", 16), budget)
    assert row["nvml_peak_used_bytes"] >= row["torch_peak_reserved_bytes"]
    if row["nvml_process_peak_used_bytes"] is not None:  # None under a foreign PID namespace
        assert row["nvml_process_peak_used_bytes"] >= row["torch_peak_reserved_bytes"]
    if gpu_alone.workers(request.config) == 1:
        # The grid keeps its rate, so the derived window holds the counter's bound. Shared,
        # the sampler's readings spread (other samplers hold NVML's lock, other processes the
        # cores) and the figure may be null, with its reason: what the row must then say.
        assert row["nvml_sample_hz"] >= 0.9 / nvml.DEFAULT_INTERVAL_S
        assert row["energy_method"] in ("counter", "power_integral"), row["energy_note"]
    if row["energy_method"] is None:
        assert row["energy_j_per_step"] is None and row["energy_note"]
    else:
        assert 0 <= row["energy_error_rel"] <= energy.MAX_STATED_ERROR_REL
        if row["energy_method"] == "counter":
            assert row["energy_counter_resolution_s"] > 0
        power_times_time = row["avg_power_w"] * row["wall_time_s"] / row["steps_measured"]
        assert row["energy_j_per_step"] == pytest.approx(power_times_time, rel=0.2)
        assert row["samples_per_j"] == pytest.approx(16 / row["energy_j_per_step"])
    assert row["gpu_util_pct"] > 50 and row["sm_clock_mhz"] > 0 and row["temperature_c"] > 0
    assert row["throttle_reasons"] is not None
