"""The harness: build one point's workload, train it, time it, and turn that into a result row."""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from gpubench import models, precision
from gpubench.results import make_row
from gpubench.spec import Budget, Point
from gpubench.step import prepare, unsupported_reason
from gpubench.timing import measure


def measure_point(point: Point, budget: Budget) -> dict[str, Any]:
    """Measure `point` and return its row. Unsupported combinations give an `unsupported` row;
    errors (out of memory included) propagate to the caller, which classifies them."""
    started = time.perf_counter()
    reason = unsupported_reason(point)
    if reason is not None:
        return make_row(point, "unsupported", error=reason)
    device = torch.device(point.device)
    torch.manual_seed(point.seed)
    workload = models.build(point.model, point.model_size)
    reason = unsupported_reason(point, workload)
    if reason is not None:
        return make_row(point, "unsupported", error=reason)
    prec = precision.get(point.precision)
    with precision.tf32_mode(prec.tf32):
        prepared = prepare(point, workload)
        trainer = prepared.trainer
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        m = measure(prepared.step, device, budget)
    first, last = (float(t.item()) for t in m.outputs)  # type: ignore[attr-defined]
    s = m.stats
    tokens = workload.tokens(point.batch_size)
    flops = (
        workload.flops_per_sample * point.batch_size
        if workload.flops_per_sample is not None
        else None
    )
    status = "ok" if math.isfinite(last) else "diverged"
    return make_row(
        point,
        status,
        error=None if status == "ok" else f"loss became {last} during measurement",
        optimizer_impl=trainer.optimizer_impl,
        parameters=workload.parameter_count(),
        samples_per_step=point.batch_size,
        tokens_per_step=tokens,
        warmup_steps=m.warmup_steps,
        warmup_time_s=m.warmup_time_s,
        steps_measured=s.n,
        step_time_s=s.median_s,
        step_time_mean_s=s.mean_s,
        step_time_iqr_s=s.iqr_s,
        step_time_p90_s=s.p90_s,
        step_time_cv=s.cv,
        step_time_ci_rel=s.ci_rel,
        noisy=m.noisy,
        wall_time_s=m.wall_time_s,
        samples_per_s=point.batch_size / s.median_s,
        tokens_per_s=None if tokens is None else tokens / s.median_s,
        flops_per_step=flops,
        tflops=None if flops is None else flops / s.median_s / 1e12,
        torch_peak_allocated_bytes=(
            torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        ),
        torch_peak_reserved_bytes=(
            torch.cuda.max_memory_reserved(device) if device.type == "cuda" else None
        ),
        loss_first=first,
        loss_last=last,
        torch_threads=torch.get_num_threads(),
        point_time_s=time.perf_counter() - started,
        compile_time_s=_compile_time(point, prepared.capture_time_s, m.first_step_s, s.median_s),
        step_times_s=m.step_times_s,
    )


def _compile_time(
    point: Point, capture_s: float | None, first_step_s: float, median_s: float
) -> float | None:
    """One-off seconds to compile (torch.compile happens in the first step: its time beyond a
    steady step) or to capture a CUDA graph; None for an eager step."""
    if point.compile == "compile":
        return max(first_step_s - median_s, 0.0) + (capture_s or 0.0)
    return capture_s
