"""A rank function for the gradient-accumulation tests of parallel points (not part of
gpubench): one optimizer step of the harness's own trainer on a wrapped tiny model, with the
gradient-reducing collectives it ran counted under the profiler."""

from __future__ import annotations

from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from gpubench import models
from gpubench.config.spec import Point
from gpubench.harness import parallel
from gpubench.harness.train import make_trainer

# Collectives that reduce gradients (DDP: all_reduce; FSDP2: reduce_scatter, or on gloo an
# all_reduce); FSDP2's parameter all-gathers run every micro-batch whatever the sync, so are
# not counted.
REDUCING = ("all_reduce", "allreduce", "reduce_scatter")


def accumulated_step(
    rank: int,
    world: int,
    init_method: str,
    timeout_s: float,
    mode: str,
    accumulate: int,
    batch: int,
) -> dict[str, Any]:
    """One warm-up step, then one step under the profiler, of `mode` ("ddp" or "fsdp") over
    `world` ranks at `accumulate` micro-batches of this rank's `batch` samples. Returns the
    reducing collectives the profiled step ran (by name) and this rank's gradients after it
    (the local shard under FSDP; numpy arrays, in parameter order)."""
    point = Point("transformer", "tiny", "cpu", "fp32", "sgd", batch, parallel=mode, nproc=world)
    parallel.init_group(point, rank, world, init_method, timeout_s)  # the launch leaves it
    torch.manual_seed(0)
    workload = models.build("transformer", "tiny")
    workload.model = parallel.wrap(workload.model, mode, torch.device("cpu"))
    trainer = make_trainer(workload, torch.device("cpu"), "fp32", "sgd", accumulate=accumulate)
    x, y = workload.batch(batch, "cpu", seed=7 + rank)
    trainer.step(x, y)  # DDP builds its buckets, FSDP2 its state, in the first step
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.step(x, y)
    names = [e.name for e in prof.events() if any(r in e.name.lower() for r in REDUCING)]
    grads = [_local(p.grad).detach().numpy().copy() for p in trainer.model.parameters()]
    return {"collectives": names, "grads": grads}


def _local(t: Any) -> torch.Tensor:
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t
