"""One training step of any Workload benchmarked outside a sweep (the pytest plugin), through
the sweep's own function (harness.point.measure_workload), so a step time or MFU recorded in
CI means what a sweep's does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from gpubench.config.checks import (
    check_accumulate,
    check_batch_size,
    check_device,
    check_divides,
    check_one_of,
    check_seed,
)
from gpubench.config.spec import CHECKPOINT_MODES, DATA_MODES, PRECISIONS, Budget, Point
from gpubench.harness import optimizers
from gpubench.harness.point import measure_workload
from gpubench.harness.step import unsupported_reason
from gpubench.harness.timing import Measurement
from gpubench.models.workload import Workload
from gpubench.probes import calibration
from gpubench.probes.current_device import made_current
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


def resolve_device(name: str | torch.device) -> torch.device:
    """`auto` is CUDA where present, else the CPU; anything else must be cpu, cuda or cuda:N."""
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
    accumulate: int = 1,
    checkpoint: str = "none",
) -> StepBenchmark:
    """Warm up and time `workload`'s training step at `batch_size` as a sweep point would.

    Raises ConfigError for a bad argument and Unsupported when the device cannot run the
    combination. The workload's model is moved to the device and trained in place. A loss that
    is not finite after the measured steps raises FloatingPointError: a benchmark of a diverged
    run measures nothing worth gating on. `accumulate` micro-batches of batch_size / accumulate
    samples make one step; `checkpoint` "blocks" recomputes the model's repeated blocks.
    """
    check_batch_size(batch_size)
    check_seed(seed)
    check_one_of(precision_name, PRECISIONS, "precision")
    check_one_of(optimizer, tuple(optimizers.DEFAULT_LR), "optimizer")
    check_one_of(data, DATA_MODES, "data mode")
    check_divides(batch_size, check_accumulate(accumulate))
    check_one_of(checkpoint, CHECKPOINT_MODES, "checkpoint mode")
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
        accumulate=accumulate,
        checkpoint=checkpoint,
    )
    reason = unsupported_reason(point, workload)
    if reason is not None:
        raise Unsupported(reason)
    budget = Budget() if budget is None else budget
    torch.manual_seed(seed)
    peak = calibration.matmul_peak(dev, precision_name)
    with made_current(dev):
        values, m = measure_workload(point, workload, budget, peak, lr)
    if m is None:
        raise Unsupported(values["error"])
    if values["status"] == "diverged":
        raise FloatingPointError(f"{workload.name}: {values['error']}")
    # the profile is a JSONL series (issue 15); its summary columns stay
    dropped = ("status", "error", "step_times_s", "profile")
    info = {**point.to_dict(), "model_size": model_size}
    info |= {k: v for k, v in values.items() if k not in dropped}
    return StepBenchmark(m, {k: finite_or_none(v) for k, v in info.items()})
