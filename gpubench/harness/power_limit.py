"""The GPU power limit as an axis (issue 32): `--power-limit 300,500,700` sets each point's GPU
limit through NVML for the point and restores the one before after it, whatever the point did.
Where it cannot be set (the CPU, no NVML, a limit outside the card's range, a driver or user
without the permission: most VMs and non-root users) the point is refused with the reason, as an
`unsupported` row, and nothing is measured under a limit it did not get.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from gpubench.config.spec import Point
from gpubench.probes import nvml
from gpubench.probes.current_device import cuda_index
from gpubench.store.wording import number, span


class Refused(Exception):
    """The point's power limit cannot be set here; the message says why."""


@contextlib.contextmanager
def applied(point: Point) -> Iterator[None]:
    """`point`'s power limit set on its GPU for the block and the previous one restored after
    (None: nothing is touched); Refused, before the block runs, where it cannot be set."""
    watts = point.power_limit_w
    if watts is None:
        yield
        return
    device = torch.device(point.device)
    if device.type != "cuda":
        raise Refused(
            f"power limit {number(watts)} W: a GPU's limit, set through NVML; "
            f"the {device.type} has none"
        )
    reason = nvml.unavailable_reason()
    if reason is not None:
        raise Refused(f"power limit {number(watts)} W: NVML unavailable ({reason})")
    index = cuda_index(device)
    limits = nvml.power_limit_range_w(index)
    if limits is not None and not limits[0] <= watts <= limits[1]:
        raise Refused(
            f"power limit {number(watts)} W is outside this GPU's {span(*limits)} W; "
            "allowed: a limit in that range"
        )
    before = nvml.power_limit_w(index)
    if before is None:
        raise Refused(
            f"power limit {number(watts)} W: NVML cannot read the current limit to restore it"
        )
    why = nvml.set_power_limit_w(index, watts)
    if why is not None:
        raise Refused(
            f"power limit {number(watts)} W: the driver refused ({why}); setting it needs "
            "root and a driver that allows it (most VMs do not)"
        )
    try:
        yield
    finally:
        failed = nvml.set_power_limit_w(index, before)
        # a limit left changed would skew every later point and the user's other work
        if failed is not None:
            raise RuntimeError(
                f"could not restore the GPU's power limit to {number(before)} W: {failed}"
            )
