"""What a rank of a parallel point observes besides its step times (a steady step's FLOPs and
bytes, the load outside the group), and what the group's row makes of them (oversubscribed
cores, address space, its GPUs' NVML readings and energy). A rank's reading of other
processes' load leaves out gpubench's process tree (probes.process_tree), which holds every
rank (forked by the fork server, or under torchrun's agent): no rank counts another."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from gpubench.harness.step import PreparedStep
from gpubench.probes.step_count import CountStep


@dataclass(frozen=True)
class CountedStep:
    """One steady step's loss (unsynchronised), this rank's FLOPs, the model's share of them
    (recomputations left out: what MFU divides) and the minimum bytes moved."""

    loss: Tensor
    flops: int
    bytes: int
    model_flops: int


def counted_step(prepared: PreparedStep) -> CountedStep:
    """Run one training step of `prepared` under the FLOP and byte counters (every rank, as the
    collectives must match; they count no FLOPs)."""
    inputs, targets = prepared.batches.next()
    with CountStep() as counted:
        loss = prepared.trainer.step(inputs, targets)
    assert counted.result is not None
    n = counted.result.flops
    return CountedStep(loss, n.total, counted.result.bytes.total, n.model)


def outside_load(readings: list[float | None]) -> float | None:
    """The cores processes outside gpubench's tree kept busy while the group measured: the
    largest of the ranks' readings, None where no rank could tell."""
    return largest(readings)


def oversubscribed(nproc: int, threads: int, cores: int) -> bool:
    """Whether `nproc` processes of `threads` threads each want more than this node's `cores`
    (their step times then say so, not the hardware's)."""
    return nproc * threads > cores


def address_space(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """The row's address-space columns from each rank's figures: the peak and start of the rank
    that mapped the most beyond its start (what --max-memory caps, per rank)."""
    known = [r for r in ranks if r.get("peak_address_space_bytes") is not None]
    if not known:
        return {}
    top = max(
        known, key=lambda r: r["peak_address_space_bytes"] - (r["start_address_space_bytes"] or 0)
    )
    return dict(
        host_peak_address_space_bytes=top["peak_address_space_bytes"],
        host_address_space_start_bytes=top["start_address_space_bytes"],
    )


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
