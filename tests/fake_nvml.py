"""Reading functions for the NVML sampling process in the CPU tests (not part of gpubench):
a device whose energy counter moves in steps, as NVML's does, and one that fails."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

from gpubench.probes.nvml_readings import Reading


def stepped_counter(power_w: float, update_s: float) -> Callable[[], Reading]:
    """A device drawing `power_w` whose energy counter moves every `update_s` seconds. Its
    process memory field holds the PID of the process that reads it."""
    t0 = time.perf_counter()

    def read() -> Reading:
        t = time.perf_counter()
        shown = math.floor((t - t0) / update_s) * update_s
        return Reading(
            t_s=t,
            used_bytes=1,
            process_used_bytes=os.getpid(),
            power_w=power_w,
            energy_j=1000.0 + power_w * shown,
        )

    return read


def failing_after(n: int) -> Callable[[], Reading]:
    """Reads `n` times, then raises as a GPU that fell off the bus would."""
    calls = [0]

    def read() -> Reading:
        calls[0] += 1
        if calls[0] > n:
            raise OSError("device fell off the bus")
        return Reading(t_s=time.perf_counter())

    return read
