"""One parallel point on one rank: the process group, the model wrapped in DistributedDataParallel
or sharded with FSDP2's fully_shard, the measured steps (every rank runs the same number), and
rank 0's row built from every rank's figures.

All ranks must issue the same collectives in the same order, so nothing here decides alone:
the warm-up's length is rank 0's decision, broadcast, and the number of measured steps comes
from the slowest rank's warm-up step, agreed by an all-reduce.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import math
import os
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from gpubench import models
from gpubench.config import precision
from gpubench.config.model_options import decode
from gpubench.config.spec import Budget, Point
from gpubench.harness import parallel_probes
from gpubench.harness import step as step_mod
from gpubench.harness.point import (
    _datasheet_peak,
    cpu_energy,
    nvml_sampler,
    nvml_values,
    profile_plan,
    profile_values,
)
from gpubench.harness.timing import Stats, StepMarks, steady, still_warming, synchronize
from gpubench.probes import breakdown, calibration, communication, flops, load, memory, rapl
from gpubench.probes import profile as step_profile
from gpubench.probes.bandwidth import cached_bandwidth
from gpubench.probes.profile import StepProfile
from gpubench.store.row import make_row

BACKENDS = {"cpu": "gloo", "cuda": "nccl"}
CPU_THREADS_PER_RANK = 1


def per_process_batch(point: Point) -> int:
    """The batch each rank trains on (Point.per_process_batch)."""
    return point.per_process_batch()


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
    if point.scaling == "strong" and point.batch_size % point.world_size:
        return (
            f"strong scaling splits the global batch {point.batch_size} over "
            f"{point.world_size} processes; allowed: a batch size divisible by nproc * nodes"
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
    """`model` on `device`, in DistributedDataParallel ("ddp") or sharded by FSDP2 ("fsdp")
    over a mesh of `device`'s type (its parameters stay on `device`): each element of its
    top-level ModuleLists and Sequentials is a unit of its own (gathered only while it
    computes, as torchtitan shards each transformer block), the rest with the root. Call
    inside an initialised process group."""
    model = model.to(device)
    if mode == "ddp":
        ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)
    assert mode == "fsdp", mode
    from torch.distributed.fsdp import fully_shard

    mesh = device_mesh(device)
    for unit in _units(model):
        fully_shard(unit, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def device_mesh(device: torch.device) -> Any:
    """A one-dimensional mesh of every rank of the process group, of `device`'s type. Named
    explicitly: without a mesh, fully_shard takes the machine's accelerator (a CUDA mesh
    wherever CUDA is present), so a CPU point on a GPU host would shard onto the GPU."""
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(device.type, (dist.get_world_size(),))


def start_threads(mode: str, device: torch.device, profiled: bool) -> None:
    """Run one training step of a one-weight model wrapped as `mode` says, so that the threads
    a parallel step starts exist before a memory cap is set: a thread started later under an
    address-space cap cannot get its thread-local storage, and glibc aborts the process
    ("cannot allocate memory for thread-local data", exit status 127) where an allocation
    would have raised (a DDP rank under a 600M cap, torch 2.13: in DistributedDataParallel's
    construction; the profiler's start). The worker starts the intra-op threads before its cap
    for the same reason. `profiled`: the step runs under the profiler too, as the point's last
    steps will (every rank: the step's collectives must match)."""
    model = wrap(nn.Linear(1, 1), mode, device)

    def step() -> None:
        model(torch.ones(2, 1, device=device)).sum().backward()

    step()
    if profiled:
        step_profile.profile_steps(step, device, 1)
    synchronize(device)


def _units(module: nn.Module) -> list[nn.Module]:
    out: list[nn.Module] = []
    for child in module.children():
        if isinstance(child, nn.ModuleList | nn.Sequential):
            out.extend(c for c in child if any(True for _ in c.parameters()))
        else:
            out.extend(_units(child))
    return out


def rank_threads(point: Point) -> int:
    """A CPU rank's torch threads: the analogue of one device is one core's thread (torchrun's
    default, OMP_NUM_THREADS=1), so adding ranks adds cores and nproc = 1 is a one-core
    baseline; the threads axis, where a suite sets it, gives each rank that many instead."""
    return point.threads or CPU_THREADS_PER_RANK


def measure_rank(
    point: Point, budget: Budget, peak: calibration.Peak | None = None
) -> dict[str, Any] | None:
    """Measure this rank's share of `point` in the initialised process group; return the row on
    rank 0 (None on the others). An exception on any rank propagates (the launcher makes the
    row); the others then fail in their next collective or are stopped. `peak` is one rank's
    measured matmul roof (rank 0 calibrates it where it is not given)."""
    started = time.perf_counter()
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0 and peak is None:
        with _rank_threads(point):
            peak = calibration.matmul_peak(point.device, point.precision)
    with load.OtherLoad() as whole:
        values = _rank_values(point, budget, rank)
        if "unsupported" not in values and values["others_cores"] is None:
            whole.lengthen()  # steps too short to tell: the load around them
    if "unsupported" not in values and values["others_cores"] is None:
        values["others_cores"] = whole.cores  # every row that timed steps carries the check
    gathered: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object(values, gathered, dst=0)
    if gathered is None:
        return None
    return group_row(point, gathered, world, budget, time.perf_counter() - started, peak)


@contextlib.contextmanager
def _rank_threads(point: Point) -> Iterator[None]:
    if torch.device(point.device).type == "cpu":
        torch.set_num_threads(rank_threads(point))
    yield


def _rank_values(point: Point, budget: Budget, rank: int) -> dict[str, Any]:
    start_address_space = memory.address_space_bytes()  # what --max-memory does not count
    device = rank_device(point)
    if device.type == "cpu":
        torch.set_num_threads(rank_threads(point))
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
        # Other processes' load over the warm-up and the measured steps (the measured steps
        # alone can be shorter than the load's clock can read)
        with load.OtherLoad() as others:
            warm = _warm_up(prepared, device, budget)
            steps = steps_to_measure(budget, warm.estimate_s)
            # The probes of a single process's measured windows: each rank samples its own
            # GPU; the CPU package's energy is the node's, read by rank 0 alone.
            sampler = nvml_sampler(device)
            package = rapl.PackageEnergy() if rank == 0 else None
            with (
                memory.HostPeakRSS() as rss,
                peaks,
                sampler if sampler is not None else contextlib.nullcontext(),
                package if package is not None else contextlib.nullcontext(),
            ):
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
        times = marks.step_times()
        profiled = _profile(prepared.step, device, budget, times, warm.time_s + wall)
    whole = profiled if isinstance(profiled, StepProfile) else None
    collective_s = None if whole is None else whole.category_s["collective"]
    return dict(
        rank=rank,
        step_times_s=times,
        wall_time_s=wall,
        warmup_steps=warm.steps,
        warmup_time_s=warm.time_s,
        warmup_steady=warm.steady,
        loss_first=float(warm.first_loss.item()),
        loss_last=float(last.item()),
        flops_per_step=warm.counted.flops,
        model_flops_per_step=warm.counted.model_flops,
        bytes_per_step=warm.counted.bytes,
        peak_rss_bytes=rss.peak_bytes,
        peak_address_space_bytes=rss.peak_address_space_bytes,
        start_address_space_bytes=start_address_space,
        peak_allocated_bytes=peaks.allocated_bytes,
        peak_reserved_bytes=peaks.reserved_bytes,
        remainder_bytes=state.remainder_bytes(peaks.allocated_bytes),
        inputs_bytes=prepared.batches.held_bytes,
        nvml=nvml_values(sampler, steps, per_process_batch(point)),
        cpu_energy=None
        if package is None
        else cpu_energy(package, steps, per_process_batch(point) * point.nproc),
        parameters_bytes=state.parameters_bytes,
        gradients_bytes=state.gradients_bytes,
        optimizer_bytes=state.optimizer_bytes,
        collective_time_s=collective_s,
        collective_fraction=None
        if whole is None
        else whole.category_s["collective"] / whole.step_time_s,
        profile=profiled if rank == 0 else None,
        others_cores=others.cores,
        threads=torch.get_num_threads(),
        parameters=sum(p.numel() for p in prepared.trainer.model.parameters()),
        tokens_per_sample=workload.tokens_per_sample,
        workload=workload.name,
        optimizer_impl=prepared.trainer.optimizer_impl,
        timer="cuda_event" if marks.cuda else "perf_counter",
    )


@dataclass(frozen=True)
class WarmUp:
    """A rank's warm-up: the first step's loss, the counted (second) step, the steps run and
    their seconds, the slowest rank's estimate of a step (seconds), and whether every rank
    ended it steady."""

    first_loss: Tensor
    counted: parallel_probes.CountedStep
    steps: int
    time_s: float
    estimate_s: float
    steady: bool


def _warm_up(prepared: step_mod.PreparedStep, device: torch.device, budget: Budget) -> WarmUp:
    """The single process's warm-up rule (timing.still_warming) on each rank's own step times,
    agreed: every rank runs another step while any rank would, so all end steady (or at
    budget.warmup_max_s) on the same step. The second step runs under the FLOP and byte
    counters, and is not timed."""
    synchronize(device)
    t0 = time.perf_counter()
    first = prepared.step()
    synchronize(device)
    first_s = time.perf_counter() - t0
    counted = parallel_probes.counted_step(prepared)
    n = 2
    times: list[float] = []  # the plain steps after the counted one
    min_steps = max(budget.warmup_steps, 2)
    while _any_rank(still_warming(times, n, time.perf_counter() - t0, budget, min_steps), device):
        t_step = time.perf_counter()
        prepared.step()
        synchronize(device)
        times.append(time.perf_counter() - t_step)
        n += 1
    warm_s = time.perf_counter() - t0
    estimate = float(statistics.median(times[len(times) // 2 :])) if times else first_s
    slowest = torch.tensor([estimate], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    is_steady = not _any_rank(not steady(times, budget.warmup_steady_rel), device)
    return WarmUp(first, counted, n, warm_s, float(slowest.item()), is_steady)


def _any_rank(flag: bool, device: torch.device) -> bool:
    """Whether `flag` holds on any rank (a collective: every rank must call it)."""
    t = torch.tensor([int(flag)], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def _profile(
    step: Any, device: torch.device, budget: Budget, times: list[float], spent_s: float
) -> StepProfile | str | None:
    """The single process's profile plan (point.profile_plan) on the slowest rank's median step
    and the longest warm-up and measurement, so every rank profiles the same steps (their
    collectives must match); the profile of this rank's steps, collectives included."""
    agreed = torch.tensor([statistics.median(times), spent_s], dtype=torch.float64, device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
    plan = profile_plan(budget, float(agreed[0]), float(agreed[1]))
    if plan is None or isinstance(plan, str):
        return plan
    return step_profile.profile_steps(step, device, plan)


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
    point: Point,
    ranks: list[dict[str, Any]],
    world: int,
    budget: Budget,
    point_time_s: float,
    peak: calibration.Peak | None = None,
) -> dict[str, Any]:
    """Rank 0's row of the whole group from each rank's figures: the group is as fast as its
    slowest rank; memory is per rank (the largest); FLOPs and bytes are the group's (every
    rank's summed) and its roofs `world` times one rank's (`peak`: one rank's measured matmul
    roof); the profile is rank 0's."""
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
    threads = r0["threads"]
    others = parallel_probes.outside_load([r["others_cores"] for r in ranks])
    # this node's ranks' cores: one each on a GPU, their threads' on the CPU
    per_rank = load.needed_cores(point.device, threads)
    needed = point.nproc * per_rank
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
        warmup_steady=r0["warmup_steady"],
        **s.columns(),
        noisy=not math.isfinite(s.ci_rel) or s.ci_rel > budget.target_rel_ci,
        **_compute_values(point, ranks, world, s.median_s, peak),
        **profile_values(r0["profile"], s.median_s),
        # the busy check of a single process, for the group's threads: processes outside it
        other_load_cores=others,
        busy=load.contended(others, needed, load.cores()),
        oversubscribed=parallel_probes.oversubscribed(point.nproc, per_rank, load.cores()),
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
        memory_inputs_bytes=_max(r.get("inputs_bytes") for r in ranks),
        memory_remainder_bytes=_max(r.get("remainder_bytes") for r in ranks),
        workload=r0.get("workload"),
        host_peak_rss_bytes=_max(r["peak_rss_bytes"] for r in ranks),
        **parallel_probes.address_space(ranks),
        torch_peak_allocated_bytes=_max(r["peak_allocated_bytes"] for r in ranks),
        torch_peak_reserved_bytes=_max(r.get("peak_reserved_bytes") for r in ranks),
        **parallel_probes.group_nvml([r.get("nvml") or {} for r in ranks], global_batch),
        **(r0.get("cpu_energy") or {}),
        per_process_samples_per_s=global_batch / s.median_s / world,
        slowest_rank_step_time_s=s.median_s,
        rank_step_time_spread=(max(medians) - min(medians)) / statistics.median(medians),
        collective_time_s=_median(r["collective_time_s"] for r in ranks),
        collective_fraction=_median(r["collective_fraction"] for r in ranks),
        collective_method=None if r0["collective_time_s"] is None else communication.METHOD,
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


def _compute_values(
    point: Point,
    ranks: list[dict[str, Any]],
    world: int,
    median_s: float,
    peak: calibration.Peak | None,
) -> dict[str, Any]:
    """The group's FLOPs, MFU (against `world` datasheet peaks), fraction of `world` measured
    matmul roofs, and place on the roofline (bytes every rank moves, `world` bandwidth roofs)."""
    device = torch.device(point.device)
    flop_count = sum(r["flops_per_step"] for r in ranks)
    nbytes = sum(r["bytes_per_step"] for r in ranks)
    tflops = flop_count / median_s / 1e12
    sheet = _datasheet_peak(rank_device(point), point.precision)
    roof = None if peak is None else peak.tflops * world
    bandwidth = cached_bandwidth(device)
    return dict(
        flops_per_step=flop_count,
        tflops=tflops,
        # MFU counts the model's FLOPs, recomputations left out (PaLM), as a single process does
        mfu=None
        if sheet is None
        else sum(r["model_flops_per_step"] for r in ranks) / median_s / 1e12 / (sheet * world),
        matmul_roof_fraction=None if roof is None else tflops / roof,
        flops_method=flops.COUNTER,
        peak_tflops=roof,
        datasheet_peak_tflops=None if sheet is None else sheet * world,
        bytes_per_step=nbytes,
        intensity_flop_per_byte=flop_count / nbytes if nbytes else None,
        achieved_gb_per_s=nbytes / median_s / 1e9,
        peak_bandwidth_gb_per_s=None if bandwidth is None else bandwidth.gb_per_s * world,
    )


def _median(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _max(values: Any) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None
