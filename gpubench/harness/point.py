"""The harness: build one point's workload, train it, time it, and turn that into a result row."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import torch

from gpubench import models
from gpubench.config.spec import Budget, Point
from gpubench.harness.observation import Observation, observe
from gpubench.harness.step import build_workload, unsupported_reason
from gpubench.harness.timing import Measurement
from gpubench.probes import calibration, datasheet, flops, memory
from gpubench.probes import profile as step_profile
from gpubench.probes.bandwidth import cached_bandwidth
from gpubench.probes.sampler_process import ProcessSampler
from gpubench.store.row import make_row


def measure_point(point: Point, budget: Budget) -> dict[str, Any]:
    """Measure `point` and return its row. Unsupported combinations give an `unsupported` row;
    errors (out of memory included) propagate to the caller, which classifies them."""
    started = time.perf_counter()
    start_address_space = memory.address_space_bytes()  # what --max-memory does not count
    reason = unsupported_reason(point)
    if reason is not None:
        return make_row(point, "unsupported", error=reason)
    # Calibrated once per device and precision (then cached), outside the point's RSS peak.
    peak = calibration.matmul_peak(point.device, point.precision)
    with memory.HostPeakRSS() as rss:
        values, _ = measure_workload(point, build_workload(point), budget, peak, rss=rss)
    return make_row(
        point,
        values.pop("status"),
        **values,
        host_peak_rss_bytes=rss.peak_bytes,
        host_peak_address_space_bytes=rss.peak_address_space_bytes,
        host_address_space_start_bytes=start_address_space,
        point_time_s=time.perf_counter() - started,
    )


def measure_workload(
    point: Point,
    workload: models.Workload,
    budget: Budget,
    peak: calibration.Peak | None,
    lr: float | None = None,
    rss: memory.HostPeakRSS | None = None,
) -> tuple[dict[str, Any], Measurement | None]:
    """Warm up and time `workload`'s training step as `point` says (its model is trained in
    place; `lr` None: the optimizer's default) and return the row's values, with `status`
    and `error`, and the raw Measurement (None when the point is unsupported). The one
    measurement path of the sweep (measure_point) and the fixture (stepbench); a parallel
    point's ranks measure through its observe()."""
    reason = unsupported_reason(point, workload)
    if reason is not None:
        return dict(status="unsupported", error=reason), None
    seen = observe(point, workload, budget, lr, rss)
    return row_values(point, workload, peak, seen), seen.m


def row_values(
    point: Point, workload: models.Workload, peak: calibration.Peak | None, seen: Observation
) -> dict[str, Any]:
    """The row's values (all but the host's RSS, the address space and the point's time) of
    `seen`, an Observation of `point` (a parallel rank: its share, without `peak`; the group's
    row is made of its ranks' values)."""
    device = torch.device(point.device)
    m, prepared, torch_peaks = seen.m, seen.prepared, seen.torch_peaks
    trainer, state = prepared.trainer, seen.state
    first, last = (float(t.item()) for t in m.outputs)  # type: ignore[attr-defined]
    s = m.stats
    tokens = workload.tokens(point.batch_size)
    step_flops = seen.counted.flops
    # Calibrated by the sweep at its start; a point never measures it (its buffers would count
    # in the worker's peak address space, which --max-memory caps).
    bandwidth = cached_bandwidth(device)
    status, error = loss_status(last)
    return dict(
        status=status,
        error=error,
        optimizer_impl=trainer.optimizer_impl,
        workload=workload.name,
        parameters=workload.parameter_count(),
        samples_per_step=point.batch_size,
        tokens_per_step=tokens,
        warmup_steps=m.warmup_steps,
        warmup_time_s=m.warmup_time_s,
        warmup_steady=m.warmup_steady,
        deadline_cut=m.cut,
        **s.columns(),
        noisy=m.noisy,
        wall_time_s=m.wall_time_s,
        samples_per_s=point.batch_size / s.median_s,
        tokens_per_s=None if tokens is None else tokens / s.median_s,
        **roofline_values(
            step_flops.total,
            step_flops.model,
            seen.counted.bytes.total,
            s.median_s,
            None if peak is None else peak.tflops,
            _datasheet_peak(device, point.precision),
            None if bandwidth is None else bandwidth.gb_per_s,
        ),
        torch_peak_allocated_bytes=torch_peaks.allocated_bytes,
        torch_peak_reserved_bytes=torch_peaks.reserved_bytes,
        loss_first=first,
        loss_last=last,
        compile_time_s=_compile_time(point, m),
        graph_capture_time_s=prepared.capture_time_s,
        torch_threads=torch.get_num_threads(),
        other_load_cores=seen.others.cores,
        step_times_s=m.step_times_s,
        step_timer=m.timer,
        step_time_sum_s=m.step_time_sum_s,
        flops_analytic_per_step=(
            None
            if workload.flops_per_sample is None
            else workload.flops_per_sample * point.batch_size
        ),
        flops_optimizer_per_step=flops.optimizer_flops(point.optimizer, workload.parameter_count()),
        flops_method=step_flops.method,
        flops_recomputed_per_step=step_flops.recomputed,  # issue 25
        micro_batch_size=point.batch_size // point.accumulate,
        accumulation_steps=point.accumulate,
        memory_parameters_bytes=state.parameters_bytes,
        memory_gradients_bytes=state.gradients_bytes,
        memory_optimizer_bytes=state.optimizer_bytes,
        memory_activations_bytes=seen.activations_bytes,
        memory_inputs_bytes=prepared.batches.held_bytes,
        memory_remainder_bytes=state.remainder_bytes(torch_peaks.allocated_bytes),
        **nvml_values(seen.sampler, m.stats.n, point.batch_size),
        **profile_values(seen.profiled, s.median_s),
        **seen.package.columns(m.stats.n, point.batch_size),
        **seen.fed,  # issue 31: the loader's wait and rate ({}: other data)
    )


def loss_status(last: float) -> tuple[str, str | None]:
    """A measured row's status and error from its last loss: `diverged` where not finite."""
    if math.isfinite(last):
        return "ok", None
    return "diverged", f"loss became {last} during measurement"


def roofline_values(
    flop_count: int,
    model_flops: int,
    nbytes: int,
    median_s: float,
    peak_tflops: float | None,
    datasheet_tflops: float | None,
    bandwidth_gb_per_s: float | None,
) -> dict[str, Any]:
    """The FLOP and byte columns of a step of `median_s` seconds that does `flop_count` FLOPs
    (`model_flops` of them the model's) and moves `nbytes`: its TFLOPS against the measured
    matmul roof, MFU, its intensity and bandwidth against the measured roof (None where a roof
    is unknown)."""
    tflops = flop_count / median_s / 1e12
    return dict(
        flops_per_step=flop_count,
        tflops=tflops,
        # MFU as PaLM, nanoGPT and torchtitan define it: the model's FLOPs (not those recomputed
        # by activation checkpointing or a fused attention kernel's backward) against the
        # datasheet dense peak
        mfu=None if datasheet_tflops is None else model_flops / median_s / 1e12 / datasheet_tflops,
        matmul_roof_fraction=None if peak_tflops is None else tflops / peak_tflops,
        peak_tflops=peak_tflops,
        datasheet_peak_tflops=datasheet_tflops,
        bytes_per_step=nbytes,
        intensity_flop_per_byte=flop_count / nbytes if nbytes else None,
        achieved_gb_per_s=nbytes / median_s / 1e9,
        peak_bandwidth_gb_per_s=bandwidth_gb_per_s,
    )


def profile_values(
    profiled: step_profile.StepProfile | str | None, median_s: float
) -> dict[str, Any]:
    """The row's profile columns from a profile (or why it was skipped; None: none) of a step
    whose unprofiled median is `median_s` seconds."""
    if isinstance(profiled, str):
        return dict(profile={"skipped": profiled})
    if profiled is None:
        return {}
    top, share = profiled.top_category()
    return dict(
        profile=dataclasses.asdict(profiled),
        # the profiler's own overhead inflates the profiled step: recorded, but the busy
        # fraction is taken against the unprofiled median step (capped at 1: the profiler
        # slows the operators it times too)
        profile_step_time_s=profiled.step_time_s,
        busy_fraction=min(profiled.busy_s / median_s, 1.0),
        dispatch_s=profiled.dispatch_s,
        top_category=top,
        top_category_fraction=share,
    )


def nvml_values(sampler: ProcessSampler | None, steps: int, batch_size: int) -> dict[str, Any]:
    """The NVML columns of `steps` measured steps of `batch_size` samples that `sampler` watched
    ({} where there was none, or it read nothing)."""
    if sampler is None or sampler.summary is None:
        return {}
    n = sampler.summary
    energy = None if n.energy_j is None else n.energy_j / steps
    return dict(
        nvml_peak_used_bytes=n.peak_used_bytes,
        nvml_process_peak_used_bytes=n.peak_process_used_bytes,
        energy_j_per_step=energy,
        samples_per_j=None if energy is None else batch_size / energy,
        energy_method=n.energy_method,
        avg_power_w=n.avg_power_w,
        gpu_util_pct=n.util_pct,
        sm_clock_mhz=n.sm_clock_mhz,
        temperature_c=n.temperature_c,
        throttle_reasons=n.throttle_reasons,
        nvml_sample_hz=n.sample_hz,
        energy_error_rel=n.energy_error_rel,
        energy_note=n.energy_note,
        energy_counter_resolution_s=n.energy_counter_resolution_s,
    )


def _datasheet_peak(device: torch.device, precision_name: str) -> float | None:
    if device.type != "cuda":
        return None
    return datasheet.peak_tflops(torch.cuda.get_device_name(device), precision_name)


def _compile_time(point: Point, m: Measurement) -> float | None:
    """One-off seconds torch.compile took; None for an eager step. It compiles in the first
    warm-up step: its cost is that step's own time less the median step. That includes the
    first run's own costs (allocation, the optimizer's state), as small as a step or two, and
    is near 0 where the compile was already made in this process. None, too, where the first
    step was not slower than the median (nothing to attribute to compiling) or was not timed."""
    if point.compile != "compile" or m.first_step_s is None:
        return None
    extra = m.first_step_s - m.stats.median_s
    return extra if extra > 0 else None
