"""What a rank of a parallel point observes besides its step times: the FLOPs and bytes of a
steady step, and the CPU that processes outside its group took while it measured; and what the
group's row makes of them (the load outside the group, oversubscribed cores, the group's
address space, and its GPUs' NVML readings and energy).

A rank's reading of other processes' load leaves out gpubench's whole process tree
(probes.process_tree), and the group's ranks are in it: on one node they are forked by the
sweep's fork server; under torchrun the tree's root is the agent that started them. So no
rank counts another as "other", and each node's ranks read their own node's load.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from gpubench.harness.step import PreparedStep
from gpubench.probes.step_count import CountStep


@dataclass(frozen=True)
class CountedStep:
    """One steady step run under the FLOP and byte counter: its loss (unsynchronised), and
    this rank's FLOPs, the model's share of them (recomputations left out: what MFU divides)
    and the minimum bytes moved in it."""

    loss: Tensor
    flops: int
    bytes: int
    model_flops: int


def counted_step(prepared: PreparedStep) -> CountedStep:
    """Run one training step of `prepared` under the FLOP and byte counters (as the single
    process counts its second warm-up step: a steady one). Every rank runs it, as the step's
    collectives must match; the counters see the collectives but count no FLOPs in them."""
    inputs, targets = prepared.batches.next()
    with CountStep() as counted:
        loss = prepared.trainer.step(inputs, targets)
    assert counted.result is not None
    n = counted.result.flops
    return CountedStep(loss, n.total, counted.result.bytes.total, n.model)


def outside_load(readings: list[float | None]) -> float | None:
    """The cores that processes outside gpubench's process tree kept busy while the group
    measured, from each rank's reading (probes.load.OtherLoad over its warm-up and measured
    steps: the group's ranks are in the tree, see the module docstring): the largest, None
    where no rank could tell."""
    return largest(readings)


def oversubscribed(nproc: int, threads: int, cores: int) -> bool:
    """Whether `nproc` processes of `threads` threads each want more than this node's `cores`
    (their ranks then take turns on cores, and their step times say so, not the hardware)."""
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


def largest(values: Any) -> Any:
    """The largest of `values` that is known (not None); None where none is."""
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _smallest(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _distinct(values: list[Any]) -> Any:
    seen = list(dict.fromkeys(v for v in values if v))
    return "; ".join(seen) if seen else None


# How the group's row combines one NVML column of its ranks' GPUs: the group's energy and power
# are its GPUs' together; memory, temperature and a reading's error are the worst GPU's; the
# sampling rate the slowest sampler's; utilisation and clock the GPUs' mean.
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
    """The group's NVML columns from each rank's (harness.point.nvml_values of its own GPU; {}
    where it had none): a column as _COMBINE says, any other as rank 0's; samples per joule
    are the global batch's over the group's energy. {} where no rank read NVML."""
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
