"""Time in collectives: a few training steps under torch.profiler, and the wall time during
which a communication event (gloo's work items on the CPU, NCCL's kernels on a GPU) was in
flight."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile

# Event names of collectives: gloo names its work "gloo:all_reduce" and so on; NCCL's kernels
# are "ncclDevKernel_..." (older releases: "ncclKernel_...").
_MARKERS = ("gloo:", "nccl")
METHOD = "profiler: union of communication events per step (in flight, overlap included)"


@dataclass(frozen=True)
class Collectives:
    """Per step, in seconds: `in_flight_s` while any collective ran (events that overlap are
    counted once; a collective that overlaps backward's compute counts in full), and the
    profiled step's wall time `step_s` (profiling included, so compare the two, not step_s with
    an unprofiled step)."""

    in_flight_s: float
    step_s: float

    @property
    def fraction(self) -> float:
        return self.in_flight_s / self.step_s if self.step_s > 0 else float("nan")


def is_collective(name: str) -> bool:
    return any(m in name.lower() for m in _MARKERS)


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by `intervals` (start, end), each point counted once."""
    total = 0.0
    end = float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def collective_time(
    step: Callable[[], object], device: torch.device, steps: int, sync: Callable[[], None]
) -> Collectives:
    """Run `step` `steps` times under the profiler (`sync` waits for the device) and return the
    time in collectives per step."""
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        wall = time.perf_counter() - t0
    spans = [(e.time_range.start, e.time_range.end) for e in prof.events() if is_collective(e.name)]
    return Collectives(union_length(spans) / 1e6 / steps, wall / steps)
