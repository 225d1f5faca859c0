"""What one process observes of a training step: its warm-up and measured windows
(harness.timing), a steady step's FLOPs and bytes, the probes over the windows (memory, NVML,
energy, other load) and a profile after them. A single point and each rank of a parallel
point measure here (harness.point, harness.parallel)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gpubench import models
from gpubench.config.spec import Budget, Point
from gpubench.harness import input_wait
from gpubench.harness.step import PreparedStep, backend_flags, prepare
from gpubench.harness.timing import ALONE, Group, Measurement, measure
from gpubench.probes import breakdown, load, memory, nvml, rapl
from gpubench.probes import profile as step_profile
from gpubench.probes.current_device import cuda_index
from gpubench.probes.probe import Probe
from gpubench.probes.sampler_process import ProcessSampler
from gpubench.probes.step_count import CountStep, StepCount
from gpubench.store.wording import percent, seconds

# Steps slower than this (seconds) are profiled once, whatever budget.profile_steps says.
SLOW_STEP_S = 0.05
# Profiling is skipped where its steps would add more than this share to the point's warm-up
# and measured time: it is there to explain the point, not to double its cost.
PROFILE_SHARE = 0.1


@dataclass(frozen=True)
class Observation:
    """One process's measurement of a training step: the step, its timing, a steady step's
    FLOPs and bytes, and what the probes read over the measured windows."""

    prepared: PreparedStep
    m: Measurement
    counted: StepCount
    activations_bytes: int | None  # None where not counted (a parallel rank's wrapped model)
    torch_peaks: memory.TorchPeaks
    sampler: ProcessSampler | None
    package: rapl.PackageEnergy  # RAPL is the node's (rank 0 reports it)
    others: load.OtherLoad
    profiled: step_profile.StepProfile | str | None
    state: breakdown.Breakdown
    fed: dict[str, Any]  # issue 31: the loader's wait and rate (input_wait.values; {}: none)


def observe(
    point: Point,
    workload: models.Workload,
    budget: Budget,
    lr: float | None = None,
    rss: memory.HostPeakRSS | None = None,
    group: Group = ALONE,
) -> Observation:
    """Measure the training step of `workload` (supported: step.unsupported_reason) as `point`
    says: warm-up and windows (timing.measure), its second step under the FLOP and byte
    counter, memory, NVML, energy and load over the windows, then a profile. `rss` is stopped
    after the windows. A `group` (a parallel point's ranks, each measuring its own share)
    takes every decision together, the profile's too; rank 0 reports the CPU package."""
    device = torch.device(point.device)
    torch_peaks = memory.TorchPeaks(device)
    sampler = nvml_sampler(device)
    with backend_flags(point):
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
        # not in a wrapped model: FSDP's gathered parameters would read as activations
        saved = breakdown.SavedActivations(eager.model) if point.parallel == "none" else None
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
            with counted, saved if saved is not None else contextlib.nullcontext():
                return eager.step(inputs, targets)

        m = measure(
            prepared.step,
            device,
            budget,
            probe=_all(torch_peaks, package, others, sampler),
            observed_step=observed_step,
            group=group,
        )
        fed = input_wait.values(batches, m)  # issue 31: the loader's wait and rate ({}: none)
        # After the measured windows, never inside them: a few steps under the profiler, whose
        # own memory is not the point's.
        if rss is not None:
            rss.stop()
        profiled = profile_after(prepared.step, device, budget, m, group)
    state = breakdown.breakdown(trainer.model, trainer.optimizer)  # grads and state exist now
    assert counted.result is not None
    activations = None if saved is None else saved.bytes
    return Observation(
        prepared, m, counted.result, activations, torch_peaks, sampler, package, others, profiled,
        state, fed,
    )  # fmt: skip


def nvml_sampler(device: torch.device) -> ProcessSampler | None:
    """An NVML sampler for a CUDA device, in a process of its own (it must not slow the step);
    None on the CPU or where NVML is missing (the sweep warns once about that; the fields stay
    null)."""
    if device.type != "cuda" or nvml.unavailable_reason() is not None:
        return None
    uuid = nvml.Device(cuda_index(device)).uuid()
    return ProcessSampler("gpubench.probes.nvml:device_reader", (uuid, os.getpid()))


@contextlib.contextmanager
def _all(*probes: Probe | None) -> Iterator[None]:
    """Every one of `probes` (None: none) entered in order over the block."""
    with contextlib.ExitStack() as stack:
        for probe in probes:
            if probe is not None:
                stack.enter_context(probe)
        yield


def profile_after(
    step: Any, device: torch.device, budget: Budget, m: Measurement, group: Group = ALONE
) -> step_profile.StepProfile | str | None:
    """The profile of a few more steps; None when profiling is off; the reason (a string)
    when it is skipped because its steps would cost more than PROFILE_SHARE of the point. A
    `group` plans on its slowest rank's median step and longest time, so every rank profiles
    the same steps."""
    if m.cut:  # past the deadline (every rank's, as the cut is agreed): no profile
        return None
    spent = m.warmup_time_s + m.wall_time_s
    plan = profile_plan(budget, *group.largest([m.stats.median_s, spent]))
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
            f"skipped: {n} step(s) of {seconds(median_s)} would add more than "
            f"{percent(PROFILE_SHARE)} to the point's {seconds(spent_s)} of warm-up and measurement"
        )
    return n
