"""Rank 0's row of a parallel point, made from every rank's figures (harness.parallel): the group
is as fast as its slowest rank, memory is per rank, FLOPs and bytes are the group's; and what the
row makes of its ranks' other figures: the load outside the group, oversubscribed cores, address
space, its GPUs' NVML readings and energy. A rank's reading of other processes' load leaves out
gpubench's process tree (probes.process_tree), which holds every rank (forked by the fork server,
or under torchrun's agent): no rank counts another."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Iterable
from typing import Any

import torch

from gpubench.config.spec import Budget, Point
from gpubench.harness.point import _datasheet_peak, loss_status, profile_values, roofline_values
from gpubench.harness.step_stats import Stats
from gpubench.probes import calibration, flops, load
from gpubench.probes.bandwidth import cached_bandwidth
from gpubench.probes.profile import COLLECTIVE_METHOD
from gpubench.store.row import make_row

# The process group's backend per device type (the row's `backend`).
BACKENDS = {"cpu": "gloo", "cuda": "nccl"}
# The columns the group's row takes from rank 0's values (each rank's are a single process's
# values of its share, harness.point.row_values), and those it takes as every rank's largest
# (memory is per rank).
_STATE: tuple[str, ...] = ("parameters", "gradients", "optimizer")
_AS_RANK0: tuple[str, ...] = ("optimizer_impl", "parameters", "workload", "torch_threads")
_AS_RANK0 += ("step_timer", "warmup_steps", "warmup_time_s", "warmup_steady", "loss_first")
_AS_RANK0 += ("deadline_cut", *(f"memory_{k}_bytes" for k in _STATE))
_LARGEST: tuple[str, ...] = ("host_peak_rss_bytes", "memory_inputs_bytes", "memory_remainder_bytes")
_LARGEST += ("torch_peak_allocated_bytes", "torch_peak_reserved_bytes")


def group_row(
    point: Point,
    ranks: list[dict[str, Any]],
    world: int,
    budget: Budget,
    point_time_s: float,
    peak: calibration.Peak | None,
    device: torch.device,
) -> dict[str, Any]:
    """Rank 0's row of the whole group from each rank's figures: the group is as fast as its
    slowest rank; memory is per rank (the largest); FLOPs and bytes are the group's (every
    rank's summed) and its roofs `world` times one rank's (`peak`: one rank's measured matmul
    roof; `device`: rank 0's, whose datasheet peak MFU divides); the profile is rank 0's."""
    common: dict[str, Any] = dict(
        world_size=world,
        backend=BACKENDS[torch.device(point.device).type],
        global_batch_size=point.per_process_batch() * world,
        per_process_batch_size=point.per_process_batch(),
        micro_batch_size=_micro_batch(point),  # issue 25
        point_time_s=point_time_s,
    )
    reasons = {r["unsupported"] for r in ranks if "unsupported" in r}
    if reasons:
        return make_row(point, "unsupported", error="; ".join(sorted(reasons)), **common)
    stats = [Stats.of(r["step_times_s"]) for r in ranks]
    slowest = max(range(world), key=lambda i: stats[i].median_s)
    s, r0 = stats[slowest], ranks[0]
    medians = [x.median_s for x in stats]
    global_batch = common["global_batch_size"]
    tokens = None if r0["tokens_per_step"] is None else r0["tokens_per_step"] * world
    threads = r0["torch_threads"]
    others = outside_load([r["other_load_cores"] for r in ranks])
    # this node's ranks' cores: one each on a GPU, their threads' on the CPU
    per_rank = load.needed_cores(point.device, threads)
    needed = point.nproc * per_rank
    status, error = loss_status(r0["loss_last"])
    return make_row(
        point,
        status,
        error=error,
        **{k: r0[k] for k in _AS_RANK0},
        samples_per_step=global_batch,
        tokens_per_step=tokens,
        **s.columns(),
        noisy=s.noisy(budget.target_rel_ci),
        **_compute_values(point, ranks, world, s.median_s, peak, device),
        **profile_values(r0["step_profile"], s.median_s),
        # the busy check of a single process, for the group's threads: processes outside it
        other_load_cores=others,
        busy=load.contended(others, needed, load.cores()),
        oversubscribed=oversubscribed(point.nproc, per_rank, load.cores()),
        wall_time_s=ranks[slowest]["wall_time_s"],
        samples_per_s=global_batch / s.median_s,
        tokens_per_s=None if tokens is None else tokens / s.median_s,
        loss_last=r0["loss_last"],
        step_times_s=ranks[slowest]["step_times_s"],
        step_time_sum_s=ranks[slowest]["step_time_sum_s"],
        **{k: largest(r[k] for r in ranks) for k in _LARGEST},
        **address_space(ranks),
        **group_nvml([r.get("nvml") or {} for r in ranks], global_batch),
        **(r0.get("cpu_energy") or {}),
        per_process_samples_per_s=global_batch / s.median_s / world,
        slowest_rank_step_time_s=s.median_s,
        rank_step_time_spread=(max(medians) - min(medians)) / statistics.median(medians),
        collective_time_s=median(r["collective_time_s"] for r in ranks),
        collective_fraction=median(r["collective_fraction"] for r in ranks),
        collective_method=None if r0["collective_time_s"] is None else COLLECTIVE_METHOD,
        rank_peak_rss_bytes=largest(r["host_peak_rss_bytes"] for r in ranks),
        rank_peak_allocated_bytes=largest(r["torch_peak_allocated_bytes"] for r in ranks),
        rank_parameters_bytes=max(r["memory_parameters_bytes"] for r in ranks),
        rank_model_state_bytes=max(sum(r[f"memory_{k}_bytes"] for k in _STATE) for r in ranks),
        ranks=[_rank_summary(r, x) for r, x in zip(ranks, stats, strict=True)],
        **common,
    )


def _micro_batch(point: Point) -> int | None:
    """A rank's micro-batch; None where its batch does not split (unsupported)."""
    batch = point.per_process_batch()
    return batch // point.accumulate if batch % point.accumulate == 0 else None


def _compute_values(
    point: Point,
    ranks: list[dict[str, Any]],
    world: int,
    median_s: float,
    peak: calibration.Peak | None,
    rank0_device: torch.device,
) -> dict[str, Any]:
    """The group's FLOPs (every rank's summed; MFU the model's), fraction of the matmul roof and
    place on the roofline, against `world` times one rank's roofs."""
    sheet = _datasheet_peak(rank0_device, point.precision)
    bandwidth = cached_bandwidth(torch.device(point.device))
    return roofline_values(
        sum(r["flops_per_step"] for r in ranks),
        sum(r["model_flops_per_step"] for r in ranks),
        sum(r["bytes_per_step"] for r in ranks),
        median_s,
        None if peak is None else peak.tflops * world,
        None if sheet is None else sheet * world,
        None if bandwidth is None else bandwidth.gb_per_s * world,
    ) | dict(flops_method=flops.COUNTER)


def _rank_summary(r: dict[str, Any], s: Stats) -> dict[str, Any]:
    """A rank's entry in the row's `ranks` column."""
    return dict(
        rank=r["rank"],
        peak_rss_bytes=r["host_peak_rss_bytes"],
        peak_allocated_bytes=r["torch_peak_allocated_bytes"],
        parameters_bytes=r["memory_parameters_bytes"],
        step_time_s=s.median_s,
        collective_time_s=r["collective_time_s"],
    )


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
