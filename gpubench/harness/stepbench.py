"""One training step of any Workload benchmarked outside a sweep, with the sweep's harness.

The pytest plugin (gpubench.pytest_plugin) and the project's own benchmark tests use this: the
same trainer and batches (step.prepare), precision switches and
timing (timing.measure: warm-up excluded, CUDA events read after each window, adaptive stopping)
as a sweep's point, so a step time recorded in CI means what a sweep's `step_time_s` means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from gpubench.config import precision
from gpubench.config.checks import check_batch_size, check_device, check_one_of, check_seed
from gpubench.config.spec import DATA_MODES, PRECISIONS, Budget, Point
from gpubench.harness import optimizers
from gpubench.harness.step import prepare, unsupported_reason
from gpubench.harness.timing import Measurement, measure
from gpubench.models.workload import Workload
from gpubench.probes import calibration
from gpubench.store.row import finite_or_none

# A quick run that still goes through the whole harness: one warm-up step and one timed step.
SMOKE_BUDGET = Budget.fixed(steps=1, warmup_steps=1)


class Unsupported(Exception):
    """The device cannot run this combination (tf32 on the CPU, say); the message says why."""


@dataclass(frozen=True)
class StepBenchmark:
    """A measured training step. `measurement` holds the raw step times (seconds); `info` holds
    the same fields, under the same names, as a sweep's result row (results.COLUMNS), with None
    for what cannot be measured on this device."""

    measurement: Measurement
    info: dict[str, Any]


def _mfu(
    flops: float | None, step_s: float, dev: torch.device, precision_name: str
) -> float | None:
    peak = calibration.matmul_peak(dev, precision_name)
    return None if flops is None or peak is None else flops / step_s / 1e12 / peak.tflops


def resolve_device(name: str | torch.device) -> torch.device:
    """`auto` is CUDA where present, else the CPU; anything else must be cpu, cuda or cuda:N."""
    if isinstance(name, torch.device):
        name = str(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(check_device(name))


def benchmark_step(
    workload: Workload,
    batch_size: int,
    *,
    device: str | torch.device = "auto",
    precision_name: str = "fp32",
    optimizer: str = "sgd",
    budget: Budget | None = None,
    data: str = "device",
    seed: int = 0,
    model_size: str | None = None,
    lr: float | None = None,
) -> StepBenchmark:
    """Warm up and time `workload`'s training step at `batch_size` as a sweep point would.

    Raises ConfigError for a bad argument and Unsupported when the device cannot run the
    combination. The workload's model is moved to the device and trained in place. A loss that
    is not finite after the measured steps raises FloatingPointError: a benchmark of a diverged
    run measures nothing worth gating on.
    """
    check_batch_size(batch_size)
    check_seed(seed)
    check_one_of(precision_name, PRECISIONS, "precision")
    check_one_of(optimizer, tuple(optimizers.DEFAULT_LR), "optimizer")
    check_one_of(data, DATA_MODES, "data mode")
    dev = resolve_device(device)
    point = Point(
        workload.name,
        model_size or "custom",
        str(dev),
        precision_name,
        optimizer,
        batch_size,
        seed,
        data,
    )
    reason = unsupported_reason(point, workload)
    if reason is not None:
        raise Unsupported(reason)
    budget = Budget() if budget is None else budget
    torch.manual_seed(seed)
    with precision.tf32_mode(precision.get(precision_name).tf32):
        prepared = prepare(point, workload, lr)
        trainer = prepared.trainer
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        m = measure(prepared.step, dev, budget)
    first, last = (float(t.item()) for t in m.outputs)  # type: ignore[attr-defined]
    if not math.isfinite(last):
        raise FloatingPointError(f"{workload.name}: loss became {last} during measurement")

    s = m.stats
    tokens = workload.tokens(batch_size)
    flops = None if workload.flops_per_sample is None else workload.flops_per_sample * batch_size
    cuda = dev.type == "cuda"
    info: dict[str, Any] = {
        "model": workload.name,
        "model_size": model_size,
        "device": str(dev),
        "precision": precision_name,
        "optimizer": optimizer,
        "batch_size": batch_size,
        "seed": seed,
        "data": data,
        "optimizer_impl": trainer.optimizer_impl,
        "parameters": workload.parameter_count(),
        "samples_per_step": batch_size,
        "tokens_per_step": tokens,
        "warmup_steps": m.warmup_steps,
        "warmup_time_s": m.warmup_time_s,
        "steps_measured": s.n,
        "step_time_s": s.median_s,
        "step_time_iqr_s": s.iqr_s,
        "step_time_ci_rel": finite_or_none(s.ci_rel),
        "noisy": m.noisy,
        "samples_per_s": batch_size / s.median_s,
        "tokens_per_s": None if tokens is None else tokens / s.median_s,
        "flops_per_step": flops,
        "tflops": None if flops is None else flops / s.median_s / 1e12,
        # Against the device's measured matmul peak for this precision (cached after first use).
        "mfu": _mfu(flops, s.median_s, dev, precision_name),
        "torch_peak_allocated_bytes": torch.cuda.max_memory_allocated(dev) if cuda else None,
        "torch_peak_reserved_bytes": torch.cuda.max_memory_reserved(dev) if cuda else None,
        "loss_first": first,
        "loss_last": last,
        "torch_threads": torch.get_num_threads(),
    }
    return StepBenchmark(m, info)
