"""Time in collectives, from a profile (probes.profile's `collective` category): which events
are communication (gloo's work items on the CPU, NCCL's kernels on a GPU), and the wall time
during which any was in flight."""

from __future__ import annotations

from collections.abc import Iterable

# Event names of collectives: gloo names its work "gloo:all_reduce" and so on; NCCL's kernels
# are "ncclDevKernel_..." (older releases: "ncclKernel_...").
_MARKERS = ("gloo:", "nccl")
METHOD = "profiler: union of communication events per step (in flight, overlap included)"


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
