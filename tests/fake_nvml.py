"""Reading functions for the NVML sampling process in the CPU tests (not part of gpubench):
a device whose energy counter moves in steps, as NVML's does, and one that fails; and the
sampler's schedule run on a fake clock."""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable

from gpubench.probes.nvml_readings import Reading
from gpubench.probes.sampler import sample_on_grid


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


class FakeClock:
    """A clock for the sampler's schedule (probes.sampler.sample_on_grid) that moves only when
    the sampler waits or reads: `read_s` per reading, the wait's whole length per wait, until
    `stop_s`, where the wait reports the stop. `read` returns the reading of `reading(t)` at
    the time it starts, as nvml.Device.read stamps it."""

    def __init__(self, read_s: float, stop_s: float, reading: Callable[[float], Reading]):
        self.now, self.read_s, self.stop_s, self.reading = 0.0, read_s, stop_s, reading

    def clock(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        if self.now + seconds >= self.stop_s:
            self.now = max(self.now, self.stop_s)
            return True
        self.now += seconds
        return False

    def read(self) -> Reading:
        r = self.reading(self.now)
        self.now += self.read_s
        return r


def window_readings(
    duration_s: float,
    reading: Callable[[float], Reading],
    interval_s: float = 0.01,
    read_s: float = 0.008,
    seed: int = 0,
) -> list[Reading]:
    """The readings nvml.Sampler takes over a window of `duration_s` (one at its start, one
    per slot on its grid, one at its end) of a device whose state at time t is `reading(t)`,
    each reading taking `read_s`: the sampler's own schedule, on a fake clock. The window
    ends at the last reading's time (after `duration_s` where a reading was in flight)."""
    fake = FakeClock(read_s, duration_s, reading)
    out = [fake.read()]
    sample_on_grid(fake.read, interval_s, 0.0, fake.wait, fake.clock, out, random.Random(seed))
    # the last reading on exit, once the sampling thread's reading in flight has ended
    return [*out, reading(max(fake.now, duration_s))]
