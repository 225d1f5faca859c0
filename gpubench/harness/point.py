"""The harness: build one point's workload, train it, time it, and turn that into a result row."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from gpubench import models
from gpubench.config import precision
from gpubench.config.model_options import decode
from gpubench.config.spec import Budget, Point
from gpubench.harness import input_wait
from gpubench.harness.step import cudnn_benchmark, prepare, unsupported_reason
from gpubench.harness.timing import Measurement, measure
from gpubench.probes import breakdown, calibration, datasheet, flops, load, memory, nvml, rapl
from gpubench.probes import profile as step_profile
from gpubench.probes.bandwidth import cached_bandwidth
from gpubench.probes.bytes import StepBytes
from gpubench.probes.sampler_process import ProcessSampler
from gpubench.probes.step_count import CountStep
from gpubench.store.row import make_row

# Steps slower than this (seconds) are profiled once, whatever budget.profile_steps says.
SLOW_STEP_S = 0.05
# Profiling is skipped where its steps would add more than this share to the point's warm-up
# and measured time: it is there to explain the point, not to double its cost.
PROFILE_SHARE = 0.1


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
        values = _measure(point, budget, peak, rss)
    return make_row(
        point,
        values.pop("status"),
        **values,
        host_peak_rss_bytes=rss.peak_bytes,
        host_peak_address_space_bytes=rss.peak_address_space_bytes,
        host_address_space_start_bytes=start_address_space,
        point_time_s=time.perf_counter() - started,
    )


def _measure(
    point: Point, budget: Budget, peak: calibration.Peak | None, rss: memory.HostPeakRSS
) -> dict[str, Any]:
    torch.manual_seed(point.seed)
    workload = models.build(point.model, point.model_size, **decode(point.model_options))
    values, _ = measure_workload(point, workload, budget, peak, rss=rss)
    return values


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
    measurement path of the sweep (measure_point) and the fixture (stepbench)."""
    device = torch.device(point.device)
    reason = unsupported_reason(point, workload)
    if reason is not None:
        return dict(status="unsupported", error=reason), None
    prec = precision.get(point.precision)
    torch_peaks = memory.TorchPeaks(device)
    sampler = nvml_sampler(device)
    with precision.tf32_mode(prec.tf32), cudnn_benchmark(point.cudnn_benchmark):
        prepared = prepare(point, workload, lr)
        trainer, batches = prepared.trainer, prepared.batches
        # FLOPs and bytes in one dispatch mode that keeps no tensor (issue 28: FlopCounterMode's
        # module tracker kept checkpointed blocks' recomputed activations, raising the peak).
        counted = CountStep()
        # Observed through the eager module: under a dispatch mode, torch.compile would fall
        # back to eager for good, and a graph replay dispatches no operators to count. The
        # eager module shares the parameters and the optimizer.
        eager = dataclasses.replace(
            trainer, model=getattr(trainer.model, "_orig_mod", trainer.model)
        )
        saved = breakdown.SavedActivations(eager.model)
        package = rapl.PackageEnergy()
        # Other processes' load over the measured windows only (what slows no timed step does
        # not count); gpubench's own processes (the sampler below, compile and DataLoader
        # workers, the worker's parents) are never "other" (probes.process_tree).
        others = load.OtherLoad()

        def observed_step() -> Tensor:
            """The second warm-up step, eager, under the FLOP and byte counter and the
            saved-tensor hooks: a steady step (the first one creates the optimizer's state,
            +26% bytes of `zeros_like` on mlp/small AdamW B=4, and compiles)."""
            inputs, targets = batches.next()
            with counted, saved:
                return eager.step(inputs, targets)

        m = measure(
            prepared.step,
            device,
            budget,
            probe=_window(torch_peaks, sampler, package, others),
            observed_step=observed_step,
        )
        fed = input_wait.values(batches, m)  # issue 31: the loader's wait and rate ({}: none)
        # After the measured windows, never inside them: a few steps under the profiler, whose
        # own memory is not the point's.
        if rss is not None:
            rss.stop()
        profiled = profile_after(prepared.step, device, budget, m)
    state = breakdown.breakdown(trainer.model, trainer.optimizer)  # grads and state exist now
    first, last = (float(t.item()) for t in m.outputs)  # type: ignore[attr-defined]
    s = m.stats
    tokens = workload.tokens(point.batch_size)
    assert counted.result is not None
    step_flops = counted.result.flops
    flop_count = step_flops.total
    tflops = flop_count / s.median_s / 1e12
    # MFU counts the model's FLOPs, not those recomputed by activation checkpointing or by a
    # fused attention kernel's backward (PaLM)
    model_tflops = step_flops.model / s.median_s / 1e12
    status = "ok" if math.isfinite(last) else "diverged"
    datasheet_peak = _datasheet_peak(device, point.precision)
    values = dict(
        status=status,
        error=None if status == "ok" else f"loss became {last} during measurement",
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
        flops_per_step=flop_count,
        tflops=tflops,
        # MFU as PaLM, nanoGPT and torchtitan define it: against the datasheet dense peak
        mfu=None if datasheet_peak is None else model_tflops / datasheet_peak,
        matmul_roof_fraction=None if peak is None else tflops / peak.tflops,
        torch_peak_allocated_bytes=torch_peaks.allocated_bytes,
        torch_peak_reserved_bytes=torch_peaks.reserved_bytes,
        loss_first=first,
        loss_last=last,
        compile_time_s=_compile_time(point, m),
        graph_capture_time_s=prepared.capture_time_s,
        torch_threads=torch.get_num_threads(),
        other_load_cores=others.cores,
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
        peak_tflops=None if peak is None else peak.tflops,
        datasheet_peak_tflops=datasheet_peak,
        memory_parameters_bytes=state.parameters_bytes,
        memory_gradients_bytes=state.gradients_bytes,
        memory_optimizer_bytes=state.optimizer_bytes,
        memory_activations_bytes=saved.bytes,
        memory_inputs_bytes=prepared.batches.held_bytes,
        memory_remainder_bytes=state.remainder_bytes(torch_peaks.allocated_bytes),
        **nvml_values(sampler, m.stats.n, point.batch_size),
        **_why_values(profiled, counted.result.bytes, flop_count, m, device),
        **cpu_energy(package, m.stats.n, point.batch_size),
        **fed,
    )
    return values, m


def nvml_sampler(device: torch.device) -> ProcessSampler | None:
    """An NVML sampler for a CUDA device, in a process of its own (it must not slow the step);
    None on the CPU or where NVML is missing (the sweep warns once about that; the fields stay
    null)."""
    if device.type != "cuda" or nvml.unavailable_reason() is not None:
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = nvml.Device(index).uuid()
    return ProcessSampler("gpubench.probes.nvml:device_reader", (uuid, os.getpid()))


@contextlib.contextmanager
def _window(
    torch_peaks: memory.TorchPeaks,
    sampler: ProcessSampler | None,
    package: rapl.PackageEnergy,
    others: load.OtherLoad,
) -> Iterator[None]:
    with torch_peaks, package, others, sampler if sampler is not None else contextlib.nullcontext():
        yield


def profile_after(
    step: Any, device: torch.device, budget: Budget, m: Measurement
) -> step_profile.StepProfile | str | None:
    """The profile of a few more steps; None when profiling is off; the reason (a string)
    when it is skipped because its steps would cost more than PROFILE_SHARE of the point."""
    if m.cut:  # past the deadline: no profile
        return None
    plan = profile_plan(budget, m.stats.median_s, m.warmup_time_s + m.wall_time_s)
    if plan is None or isinstance(plan, str):
        return plan
    return step_profile.profile_steps(step, device, plan)


def profile_plan(budget: Budget, median_s: float, spent_s: float) -> int | str | None:
    """How many steps to profile after a point whose median step took `median_s` and whose
    warm-up and measurement took `spent_s` seconds: None when profiling is off, the reason (a
    string) when it is skipped because its steps would cost more than PROFILE_SHARE of that."""
    if budget.profile_steps <= 0:
        return None
    n = budget.profile_steps if median_s < SLOW_STEP_S else 1
    if n * median_s > PROFILE_SHARE * spent_s:
        return (
            f"skipped: {n} step(s) of {median_s:.3g} s would add more than "
            f"{PROFILE_SHARE:.0%} to the point's {spent_s:.3g} s of warm-up and measurement"
        )
    return n


def _why_values(
    profiled: step_profile.StepProfile | str | None,
    moved: StepBytes,
    flop_count: int,
    m: Measurement,
    device: torch.device,
) -> dict[str, Any]:
    """Where the step's time goes (the profile, when taken) and its place on the roofline."""
    nbytes = moved.total
    # Calibrated by the sweep at its start; a point never measures it (its buffers would count
    # in the worker's peak address space, which --max-memory caps).
    bandwidth = cached_bandwidth(device)
    values: dict[str, Any] = dict(
        bytes_per_step=nbytes,
        intensity_flop_per_byte=flop_count / nbytes if nbytes else None,
        achieved_gb_per_s=nbytes / m.stats.median_s / 1e9,
        peak_bandwidth_gb_per_s=None if bandwidth is None else bandwidth.gb_per_s,
    )
    return values | profile_values(profiled, m.stats.median_s)


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
        profile=profiled.to_dict(),
        # the profiler's own overhead inflates the profiled step: recorded, but the busy
        # fraction is taken against the unprofiled median step (capped at 1: the profiler
        # slows the operators it times too)
        profile_step_time_s=profiled.step_time_s,
        busy_fraction=min(profiled.busy_s / median_s, 1.0),
        dispatch_s=profiled.dispatch_s,
        top_category=top,
        top_category_fraction=share,
    )


def cpu_energy(package: rapl.PackageEnergy, steps: int, batch_size: int) -> dict[str, Any]:
    """CPU package energy over the measured windows (RAPL) of `steps` steps of `batch_size`
    samples, where the machine exposes it."""
    if package.joules is None:
        return {} if package.note is None else {"cpu_energy_note": package.note}
    per_step = package.joules / steps
    return dict(
        cpu_energy_j_per_step=per_step,
        cpu_samples_per_j=batch_size / per_step if per_step > 0 else None,
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
    if point.compile != "compile":
        return None
    if m.first_step_s is None:
        return None
    extra = m.first_step_s - m.stats.median_s
    return extra if extra > 0 else None
