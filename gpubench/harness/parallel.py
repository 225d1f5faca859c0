"""One parallel point on one rank: the process group, the model in DistributedDataParallel or
sharded by FSDP2's fully_shard, measured by the single process's code (harness.point.observe)
on the rank's share; rank 0 builds the group's row (harness.parallel_probes). Every rank must
issue the same collectives in the same order, so nothing decides alone: the warm-up, the
windows and the profile take each decision through a timing.Group, whose all-reduce gives
every rank the group's answer."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from gpubench.config.spec import Budget, Point
from gpubench.harness import step as step_mod
from gpubench.harness.observation import observe
from gpubench.harness.parallel_probes import BACKENDS, group_row
from gpubench.harness.point import nvml_values, row_values
from gpubench.harness.timing import Group, synchronize
from gpubench.probes import calibration, load, memory
from gpubench.probes import profile as step_profile

CPU_THREADS_PER_RANK = 1


def per_process_batch(point: Point) -> int:
    """The batch each rank trains on (Point.per_process_batch)."""
    return point.per_process_batch()


def unsupported_reason(point: Point) -> str | None:
    """Why this parallel point cannot run here, or None (checked before any rank starts)."""
    if not dist.is_available():
        return "this torch build has no torch.distributed"
    if point.device.startswith("cuda"):
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
    if point.power_limit_w is not None:  # issue 32: set in a single process's worker only
        return "a power limit is set for single-process points only; use parallel = ['none']"
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
    kind = torch.device(point.device).type
    if kind == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank % point.nproc)))
    dist.init_process_group(
        BACKENDS[kind],
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
    over a mesh of `device`'s type: each element of its top-level ModuleLists and Sequentials
    is a unit of its own (as torchtitan shards each transformer block), the rest the root's.
    Call inside an initialised process group."""
    model = model.to(device)
    if mode == "ddp":
        ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)
    assert mode == "fsdp", mode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    # A mesh named explicitly: without one, fully_shard takes the machine's accelerator, so a
    # CPU point on a GPU host would shard onto the GPU.
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for unit in _units(model):
        fully_shard(unit, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def start_threads(mode: str, device: torch.device, profiled: bool) -> None:
    """Run one training step of a one-weight model wrapped as `mode` says, so that the threads
    a parallel step starts exist before a memory cap is set: a thread started later under an
    address-space cap cannot get its thread-local storage, and glibc aborts the process (exit
    status 127; a DDP rank under a 600M cap, torch 2.13). `profiled`: under the profiler too,
    as the point's last steps will be (every rank: the collectives must match)."""
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
    """Measure this rank's share of `point` in the initialised process group; the row on rank 0
    (None on the others). An exception propagates (the launcher makes the row); the other ranks
    then fail in their next collective. `peak`: one rank's matmul roof (rank 0 calibrates it
    where not given)."""
    started = time.perf_counter()
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0 and peak is None:
        if torch.device(point.device).type == "cpu":
            torch.set_num_threads(rank_threads(point))
        peak = calibration.matmul_peak(point.device, point.precision)
    device = rank_device(point)
    group = Group(rank, world, lambda values: _over_ranks(values, device, dist.ReduceOp.MAX))
    with load.OtherLoad() as whole:
        values = _rank_values(point, budget, group)
        if "unsupported" not in values and values["other_load_cores"] is None:
            whole.lengthen()  # steps too short to tell: the load around them
    if "unsupported" not in values and values["other_load_cores"] is None:
        values["other_load_cores"] = whole.cores  # every row that timed steps carries the check
    gathered: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object(values, gathered, dst=0)
    if gathered is None:
        return None
    elapsed = time.perf_counter() - started
    return group_row(point, gathered, world, budget, elapsed, peak, device)


def _rank_values(point: Point, budget: Budget, group: Group) -> dict[str, Any]:
    """This rank's figures, measured through the single process's observe() on its own share
    of the batch (a seed of its own), every decision taken with the group."""
    start_address_space = memory.address_space_bytes()  # what --max-memory does not count
    device = rank_device(point)
    if device.type == "cpu":
        torch.set_num_threads(rank_threads(point))
    with memory.HostPeakRSS() as rss:
        workload = step_mod.build_workload(point)  # the same initial weights on every rank
        reason = step_mod.unsupported_reason(point, workload)
        if reason is not None:
            return {"unsupported": reason}
        workload.model = wrap(workload.model, point.parallel, device)
        batch = per_process_batch(point)
        local = dataclasses.replace(
            point, device=str(device), batch_size=batch, seed=point.seed + group.rank
        )
        seen = observe(local, workload, budget, rss=rss, group=group)
    m = seen.m
    whole = seen.profiled if isinstance(seen.profiled, step_profile.StepProfile) else None
    collective = None if whole is None else whole.category_s["collective"]
    share = None if whole is None else whole.category_s["collective"] / whole.step_time_s
    # a single process's values of this rank's share, and what the group's row adds up
    return row_values(local, workload, None, seen) | dict(
        rank=group.rank,
        model_flops_per_step=seen.counted.flops.model,
        host_peak_rss_bytes=rss.peak_bytes,
        host_peak_address_space_bytes=rss.peak_address_space_bytes,
        host_address_space_start_bytes=start_address_space,
        nvml=nvml_values(seen.sampler, m.stats.n, batch),
        # rank 0's reading of the node's CPU package: the node's samples
        cpu_energy=None
        if group.rank != 0
        else seen.package.columns(m.stats.n, batch * point.nproc),
        collective_time_s=collective,
        collective_fraction=share,
        step_profile=seen.profiled if group.rank == 0 else None,
    )


def _over_ranks(values: list[float], device: torch.device, op: Any) -> list[float]:
    """Each of `values` reduced by `op` over every rank (a collective: every rank calls it)."""
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=op)
    return [float(v) for v in t.tolist()]
