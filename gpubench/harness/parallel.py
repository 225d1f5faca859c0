"""One parallel point on one rank: the process group, the model wrapped in DistributedDataParallel
or sharded with FSDP2's fully_shard, the measured steps (every rank runs the same number), and
rank 0's row built from every rank's figures.

All ranks must issue the same collectives in the same order, so nothing here decides alone:
the warm-up's length is rank 0's decision, broadcast, and the number of measured steps comes
from the slowest rank's warm-up step, agreed by an all-reduce.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import statistics
import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from gpubench import models
from gpubench.config import precision
from gpubench.config.model_options import decode
from gpubench.config.spec import Budget, Point
from gpubench.harness import step as step_mod
from gpubench.harness.timing import Stats, StepMarks, synchronize
from gpubench.probes import breakdown, communication, memory
from gpubench.store.row import make_row

BACKENDS = {"cpu": "gloo", "cuda": "nccl"}
CPU_THREADS_PER_RANK = 1
# Extra steps run under the profiler after the measured ones, to find the time in collectives.
PROFILED_STEPS = 3


def per_process_batch(point: Point) -> int:
    """The batch each rank trains on: `batch_size` under weak scaling, its share under strong."""
    return point.batch_size // point.nproc if point.scaling == "strong" else point.batch_size


def unsupported_reason(point: Point) -> str | None:
    """Why this parallel point cannot run here, or None (checked before any rank starts)."""
    device = torch.device(point.device)
    if not dist.is_available():
        return "this torch build has no torch.distributed"
    if device.type == "cuda":
        if not dist.is_nccl_available():
            return "this torch build has no NCCL backend for CUDA ranks"
        if point.nproc > torch.cuda.device_count():
            return (
                f"nproc {point.nproc} needs {point.nproc} CUDA devices on this node, it has "
                f"{torch.cuda.device_count()} (NCCL cannot put two ranks on one GPU)"
            )
    elif not dist.is_gloo_available():
        return "this torch build has no gloo backend for CPU ranks"
    if point.scaling == "strong" and point.batch_size % point.nproc:
        return (
            f"strong scaling splits the global batch {point.batch_size} over {point.nproc} "
            "processes; allowed: a batch size divisible by nproc"
        )
    if point.cuda_graph:
        return "a whole-step CUDA graph of a parallel point is not measured (its collectives)"
    if point.compile == "compile":
        return "torch.compile of a parallel point is not measured yet; use compile = ['eager']"
    if point.parallel == "fsdp":
        try:
            from torch.distributed.fsdp import fully_shard  # noqa: F401
        except ImportError as e:
            return f"FSDP2 (torch.distributed.fsdp.fully_shard) is missing: {e}"
    return None


def init_group(point: Point, rank: int, world: int, init_method: str, timeout_s: float) -> None:
    """Join the process group of `world` ranks (gloo on the CPU, NCCL on CUDA) at
    `init_method` (tcp://host:port, or env:// under torchrun). A collective that waits longer
    than `timeout_s` seconds raises, so one rank failing or hanging ends the point everywhere."""
    device = torch.device(point.device)
    if device.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank % point.nproc)))
    dist.init_process_group(
        BACKENDS[device.type],
        init_method=init_method,
        rank=rank,
        world_size=world,
        timeout=dt.timedelta(seconds=timeout_s),
    )


def rank_device(point: Point) -> torch.device:
    device = torch.device(point.device)
    return torch.device("cuda", torch.cuda.current_device()) if device.type == "cuda" else device


def wrap(model: nn.Module, mode: str, device: torch.device) -> nn.Module:
    """`model` on `device`, in DistributedDataParallel ("ddp") or sharded by FSDP2 ("fsdp"):
    each element of its top-level ModuleLists and Sequentials is a unit of its own (gathered
    only while it computes, as torchtitan shards each transformer block), the rest with the
    root. Call inside an initialised process group."""
    model = model.to(device)
    if mode == "ddp":
        ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)
    assert mode == "fsdp", mode
    from torch.distributed.fsdp import fully_shard

    for unit in _units(model):
        fully_shard(unit)
    fully_shard(model)
    return model


def _units(module: nn.Module) -> list[nn.Module]:
    out: list[nn.Module] = []
    for child in module.children():
        if isinstance(child, nn.ModuleList | nn.Sequential):
            out.extend(c for c in child if any(True for _ in c.parameters()))
        else:
            out.extend(_units(child))
    return out


def measure_rank(point: Point, budget: Budget) -> dict[str, Any] | None:
    """Measure this rank's share of `point` in the initialised process group; return the row on
    rank 0 (None on the others). An exception on any rank propagates (the launcher makes the
    row); the others then fail in their next collective or are stopped."""
    started = time.perf_counter()
    rank, world = dist.get_rank(), dist.get_world_size()
    values = _rank_values(point, budget, rank)
    gathered: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object(values, gathered, dst=0)
    if gathered is None:
        return None
    return group_row(point, gathered, world, budget, time.perf_counter() - started)


def _rank_values(point: Point, budget: Budget, rank: int) -> dict[str, Any]:
    device = rank_device(point)
    if device.type == "cpu":
        # A CPU rank is the analogue of one device: one core's thread (torchrun's default,
        # OMP_NUM_THREADS=1), so adding ranks adds cores and nproc = 1 is a one-core baseline;
        # the threads axis, where a suite sets it, gives each rank that many instead.
        torch.set_num_threads(point.threads or CPU_THREADS_PER_RANK)
    torch.manual_seed(point.seed)  # the same initial weights on every rank
    workload = models.build(point.model, point.model_size, **decode(point.model_options))
    reason = step_mod.unsupported_reason(point, workload)
    if reason is not None:
        return {"unsupported": reason}
    workload.model = wrap(workload.model, point.parallel, device)
    # Each rank trains on batches of its own.
    local = dataclasses.replace(
        point, device=str(device), batch_size=per_process_batch(point), seed=point.seed + rank
    )
    prec = precision.get(point.precision)
    peaks = memory.TorchPeaks(device)
    with precision.tf32_mode(prec.tf32), step_mod.cudnn_benchmark(point.cudnn_benchmark):
        prepared = step_mod.prepare(local, workload)
        first, estimate, warmup_steps, warmup_s = _warm_up(prepared.step, device, budget)
        steps = steps_to_measure(budget, estimate)
        with memory.HostPeakRSS() as rss, peaks:
            marks = StepMarks(device, steps + 1)
            synchronize(device)
            t0 = time.perf_counter()
            marks.mark()
            for _ in range(steps):
                last = prepared.step()
                marks.mark()
            synchronize(device)
            wall = time.perf_counter() - t0
        state = breakdown.breakdown(prepared.trainer.model, prepared.trainer.optimizer)
        comm = communication.collective_time(
            prepared.step, device, PROFILED_STEPS, lambda: synchronize(device)
        )
    times = marks.step_times()
    return dict(
        rank=rank,
        step_times_s=times,
        wall_time_s=wall,
        warmup_steps=warmup_steps,
        warmup_time_s=warmup_s,
        loss_first=float(first.item()),
        loss_last=float(last.item()),
        peak_rss_bytes=rss.peak_bytes,
        peak_allocated_bytes=peaks.allocated_bytes,
        parameters_bytes=state.parameters_bytes,
        gradients_bytes=state.gradients_bytes,
        optimizer_bytes=state.optimizer_bytes,
        collective_time_s=comm.in_flight_s,
        collective_fraction=comm.fraction,
        parameters=sum(p.numel() for p in prepared.trainer.model.parameters()),
        tokens_per_sample=workload.tokens_per_sample,
        optimizer_impl=prepared.trainer.optimizer_impl,
        timer="cuda_event" if marks.cuda else "perf_counter",
    )


def _warm_up(step: Any, device: torch.device, budget: Budget) -> tuple[Any, float, int, float]:
    """Warm up for at least `budget.warmup_steps` steps (two at the least) and
    `budget.warmup_min_s` seconds, as rank 0 counts them. Returns the first step's loss, the
    slowest rank's last warm-up step (seconds), the steps run and their time."""
    t0 = time.perf_counter()
    n = 0
    first = None
    while True:
        t_step = time.perf_counter()
        loss = step()
        first = loss if first is None else first
        synchronize(device)
        last = time.perf_counter() - t_step
        n += 1
        more = n < max(budget.warmup_steps, 2) or time.perf_counter() - t0 < budget.warmup_min_s
        if not _agree(more, device):
            break
    slowest = torch.tensor([last], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return first, float(slowest.item()), n, time.perf_counter() - t0


def _agree(flag: bool, device: torch.device) -> bool:
    """Rank 0's `flag`, on every rank."""
    t = torch.tensor([int(flag)], device=device)
    dist.broadcast(t, src=0)
    return bool(t.item())


def steps_to_measure(budget: Budget, step_s: float) -> int:
    """Steps that fill `budget.min_time_s` at `step_s` seconds a step, within min_steps and
    max_steps, and no more than `budget.max_time_s` allows (but min_steps at the least): a
    parallel point measures a count fixed in advance, the same on every rank."""
    step_s = max(step_s, 1e-9)
    wanted = max(budget.min_steps, math.ceil(budget.min_time_s / step_s))
    affordable = budget.max_steps
    if math.isfinite(budget.max_time_s):
        affordable = max(budget.min_steps, math.floor(budget.max_time_s / step_s))
    return max(1, min(wanted, affordable, budget.max_steps))


def group_row(
    point: Point, ranks: list[dict[str, Any]], world: int, budget: Budget, point_time_s: float
) -> dict[str, Any]:
    """Rank 0's row of the whole group from each rank's figures: the group is as fast as its
    slowest rank; memory is per rank (the largest)."""
    common: dict[str, Any] = dict(
        world_size=world,
        backend=BACKENDS[torch.device(point.device).type],
        global_batch_size=per_process_batch(point) * world,
        per_process_batch_size=per_process_batch(point),
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
    tokens = None if r0["tokens_per_sample"] is None else r0["tokens_per_sample"] * global_batch
    last = r0["loss_last"]
    status = "ok" if math.isfinite(last) else "diverged"
    return make_row(
        point,
        status,
        error=None if status == "ok" else f"loss became {last} during measurement",
        optimizer_impl=r0["optimizer_impl"],
        parameters=r0["parameters"],
        samples_per_step=global_batch,
        tokens_per_step=tokens,
        warmup_steps=r0["warmup_steps"],
        warmup_time_s=r0["warmup_time_s"],
        **s.columns(),
        noisy=s.ci_rel > budget.target_rel_ci,
        wall_time_s=ranks[slowest]["wall_time_s"],
        samples_per_s=global_batch / s.median_s,
        tokens_per_s=None if tokens is None else tokens / s.median_s,
        loss_first=r0["loss_first"],
        loss_last=last,
        torch_threads=torch.get_num_threads(),
        step_times_s=ranks[slowest]["step_times_s"],
        step_timer=r0["timer"],
        step_time_sum_s=float(sum(ranks[slowest]["step_times_s"])),
        memory_parameters_bytes=r0["parameters_bytes"],
        memory_gradients_bytes=r0["gradients_bytes"],
        memory_optimizer_bytes=r0["optimizer_bytes"],
        host_peak_rss_bytes=_max(r["peak_rss_bytes"] for r in ranks),
        torch_peak_allocated_bytes=_max(r["peak_allocated_bytes"] for r in ranks),
        per_process_samples_per_s=global_batch / s.median_s / world,
        slowest_rank_step_time_s=s.median_s,
        rank_step_time_spread=(max(medians) - min(medians)) / statistics.median(medians),
        collective_time_s=statistics.median(r["collective_time_s"] for r in ranks),
        collective_fraction=statistics.median(r["collective_fraction"] for r in ranks),
        collective_method=communication.METHOD,
        rank_peak_rss_bytes=_max(r["peak_rss_bytes"] for r in ranks),
        rank_peak_allocated_bytes=_max(r["peak_allocated_bytes"] for r in ranks),
        rank_parameters_bytes=max(r["parameters_bytes"] for r in ranks),
        rank_model_state_bytes=max(
            r["parameters_bytes"] + r["gradients_bytes"] + r["optimizer_bytes"] for r in ranks
        ),
        ranks=[_rank_summary(r, x) for r, x in zip(ranks, stats, strict=True)],
        **common,
    )


def _micro_batch(point: Point) -> int | None:
    """A rank's micro-batch (issue 25); None where its batch does not split (unsupported)."""
    batch = per_process_batch(point)
    return batch // point.accumulate if batch % point.accumulate == 0 else None


def _rank_summary(r: dict[str, Any], s: Stats) -> dict[str, Any]:
    keep = ("rank", "peak_rss_bytes", "peak_allocated_bytes", "parameters_bytes")
    return {k: r[k] for k in keep} | {
        "step_time_s": s.median_s,
        "collective_time_s": r["collective_time_s"],
    }


def _max(values: Any) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None
