"""What the group's row of a parallel point makes of its ranks' figures: the load outside the
group, oversubscribed cores, address space, its GPUs' NVML readings and energy. A rank's
reading of other processes' load leaves out gpubench's process tree (probes.process_tree),
which holds every rank (forked by the fork server, or under torchrun's agent): no rank counts
another."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Iterable
from typing import Any


def outside_load(readings: list[float | None]) -> float | None:
    """The cores processes outside gpubench's tree kept busy while the group measured: the
    largest of the ranks' readings, None where no rank could tell."""
    return largest(readings)


def oversubscribed(nproc: int, threads: int, cores: int) -> bool:
    """Whether `nproc` processes of `threads` threads each want more than this node's `cores`
    (their step times then say so, not the hardware's)."""
    return nproc * threads > cores


def address_space(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """The row's address-space columns from each rank's: those of the rank that mapped the
    most beyond its start (what --max-memory caps, per rank)."""
    peak, start = "host_peak_address_space_bytes", "host_address_space_start_bytes"
    known = [r for r in ranks if r.get(peak) is not None]
    if not known:
        return {}
    top = max(known, key=lambda r: r[peak] - (r[start] or 0))
    return {peak: top[peak], start: top[start]}


def _sum(values: list[Any]) -> Any:
    return None if any(v is None for v in values) else sum(values)


def _mean(values: list[Any]) -> Any:
    return None if any(v is None for v in values) else sum(values) / len(values)


def _of_known(values: Iterable[Any], combine: Callable[[list[Any]], Any]) -> Any:
    """`combine` of the `values` that are known (not None); None where none is."""
    known = [v for v in values if v is not None]
    return combine(known) if known else None


largest = functools.partial(_of_known, combine=max)
_smallest = functools.partial(_of_known, combine=min)
median = functools.partial(_of_known, combine=statistics.median)


def _distinct(values: list[Any]) -> Any:
    seen = list(dict.fromkeys(v for v in values if v))
    return "; ".join(seen) if seen else None


# How the group's row combines one NVML column of its ranks' GPUs: energy and power summed; the
# worst GPU's memory, temperature and error; the slowest sampler's rate; the mean utilisation.
_COMBINE: dict[str, Callable[[list[Any]], Any]] = {
    "nvml_peak_used_bytes": largest,
    "nvml_process_peak_used_bytes": largest,
    "energy_j_per_step": _sum,
    "avg_power_w": _sum,
    "gpu_util_pct": _mean,
    "sm_clock_mhz": _mean,
    "temperature_c": largest,
    "throttle_reasons": _distinct,
    "nvml_sample_hz": _smallest,
    "energy_error_rel": largest,
    "energy_note": _distinct,
    "energy_counter_resolution_s": largest,
}


def group_nvml(ranks: list[dict[str, Any]], global_batch: int) -> dict[str, Any]:
    """The group's NVML columns from each rank's ({} where it had none): each as _COMBINE says,
    any other rank 0's; samples per joule the global batch's. {} where no rank read NVML."""
    if not any(ranks):
        return {}
    if len(ranks) == 1:
        return dict(ranks[0])
    names = list(dict.fromkeys(k for r in ranks for k in r))
    out = {
        k: _COMBINE.get(k, lambda v: v[0])([r.get(k) for r in ranks])
        for k in names
        if k != "samples_per_j"
    }
    energy = out.get("energy_j_per_step")
    out["samples_per_j"] = global_batch / energy if energy else None
    return out
