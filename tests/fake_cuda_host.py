"""A CPU build of torch that says CUDA is present, for the tests of CPU points on a GPU host
(not part of gpubench). `pretend()` makes this process answer as one on a machine with a GPU
would where gpubench's code (or torch's, for FSDP2's default mesh) asks: CUDA is available and
is the accelerator. Selecting a CUDA device fails, as it does on a host with fewer GPUs than
ranks ("invalid device ordinal"), so a CPU point that selects one cannot pass.

Reaching the process that matters:
- a rank of a point launched in this process: the workload `fake_cuda_host:mlp` pretends in the
  rank when the rank builds it, before its model is wrapped;
- a rank function of its own: `fsdp_parameters` pretends first;
- a process torchrun starts: `torchrun ... -m fake_cuda_host sweep ...` pretends, then runs
  gpubench's command line.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.distributed as dist

from gpubench import models
from gpubench.config.spec import Point
from gpubench.harness import parallel
from gpubench.models.workload import Workload

SET_DEVICE_REFUSED = "invalid device ordinal (fake_cuda_host: a CPU rank selected a CUDA device)"


def _refuse(device: Any) -> None:
    raise RuntimeError(f"CUDA error: {SET_DEVICE_REFUSED}: {device}")


def pretend() -> None:
    """From now on this process reports CUDA present (device_count stays this build's 0: what
    enumerates devices would need a real one)."""
    torch.cuda.is_available = lambda: True  # type: ignore[assignment]
    torch.cuda.set_device = _refuse  # type: ignore[assignment]
    # What FSDP2's fully_shard asks for its default mesh.
    torch._C._get_accelerator = lambda: torch.device("cuda")  # type: ignore[attr-defined]
    # Asked for a usable accelerator (the optimizers' graph-capture check, which then asks for
    # its current stream), none: a pretended device has no streams. (A CUDA build of torch
    # would answer from the patched is_available above, and fail without a driver.)
    torch.accelerator.current_accelerator = _accelerator  # type: ignore[assignment]


def _accelerator(check_available: bool = False) -> torch.device | None:
    return None if check_available else torch.device("cuda")


def pretended(rank: int, world: int, init_method: str, timeout_s: float) -> tuple[bool, str, str]:
    """A rank function: pretend; then whether CUDA is available, the accelerator's type, and
    the error that selecting CUDA device 0 raised ("" if none)."""
    pretend()
    try:
        torch.cuda.set_device(0)
    except RuntimeError as e:
        return torch.cuda.is_available(), torch._C._get_accelerator().type, str(e)
    return torch.cuda.is_available(), torch._C._get_accelerator().type, ""


def mlp() -> Workload:
    """The tiny MLP, built in a process that now pretends CUDA is present."""
    pretend()
    return models.build("mlp", "tiny")


def fsdp_parameters(
    rank: int, world: int, init_method: str, timeout_s: float, point: Point
) -> list[tuple[str, str]]:
    """A rank function (run.ranks.launch): pretend, join `point`'s group and wrap its model as
    the harness does; each parameter's (device type, mesh device type) after sharding."""
    pretend()
    parallel.init_group(point, rank, world, init_method, timeout_s)
    model = parallel.wrap(
        models.build(point.model, point.model_size).model, "fsdp", parallel.rank_device(point)
    )
    out = [(p.device.type, p.device_mesh.device_type) for p in model.parameters()]  # type: ignore[attr-defined]
    dist.barrier()
    return out


if __name__ == "__main__":
    pretend()
    from gpubench.cli import main

    sys.exit(main(sys.argv[1:]))
