"""A sampler that keeps the rate it promises: readings on a fixed grid of slots, not a sleep
after each reading.

Sleeping `interval` after each reading runs at 1 / (interval + reading time): on an H100, whose
NVML reading takes 4-8 ms, a 10 ms interval gave 56-71 Hz, not 100. Here slot k starts at
`start + k * interval`, so the reading's own time comes out of the wait before the next one,
and the rate is 1 / interval for any reading shorter than the interval. A reading that
overruns its slot is not followed by a burst of catch-up readings: the slots it covered are
skipped, and the achieved rate (the summary's `sample_hz`) says so.

Each reading falls at a random point of its slot (`start + (k + u_k) * interval`, u_k uniform
in [0, 1), independent): a training loop's power is periodic, and a grid whose interval is a
multiple of the step's period reads it at the same phase every time, so the power integral
would be biased by as much as the power varies within a step, with readings that agree with
each other and hide it. With a random point per slot the readings are a stratified random
sample of the window, which is what probes.energy's error bound for the power integral assumes.
The mean rate is unchanged.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable

from gpubench.probes.nvml_readings import Reading, Summary, summarise
from gpubench.probes.probe import Probe

# 100 Hz; an H100 reading takes 4-8 ms, which fits in the slot (and the sampler process absorbs)
DEFAULT_INTERVAL_S = 0.01


def first_open_slot(start: float, interval_s: float, now: float) -> int:
    """The index k >= 1 of the first slot [start + k*interval, start + (k+1)*interval) that
    has not ended at `now`: the slot a reading is still due in."""
    return max(1, math.floor((now - start) / interval_s))


def sample_on_grid(
    read: Callable[[], Reading],
    interval_s: float,
    start: float,
    wait: Callable[[float], bool],
    clock: Callable[[], float],
    out: list[Reading],
    rng: random.Random,
) -> None:
    """Append `read()` once per slot k = 1, 2, ... (slot k is [start + k*interval,
    start + (k+1)*interval)), at a uniformly random point of it, until `wait(seconds)` returns
    True (stop). A slot that has ended before its reading could start (the previous reading
    overran) gets none. `wait` sleeps up to its argument; `clock` is the time `start` is on."""
    k = 1
    while True:
        k = max(k, first_open_slot(start, interval_s, clock()))
        due = start + (k + rng.random()) * interval_s
        if wait(max(0.0, due - clock())):
            return
        out.append(read())
        k += 1


class Sampler(Probe):
    """Reads once on entry, then once per `interval_s` slot on a daemon
    thread (sample_on_grid), and once more on exit; `summary` is set on exit. An exception in
    the reading function is re-raised on exit, never swallowed. `seed` fixes the readings'
    places in their slots (None: a fresh seed)."""

    def __init__(
        self,
        read: Callable[[], Reading],
        interval_s: float = DEFAULT_INTERVAL_S,
        seed: int | None = None,
    ):
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, not {interval_s}")
        self._read = read
        self.interval_s = interval_s
        self.readings: list[Reading] = []
        self.summary: Summary | None = None
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        start = time.perf_counter()
        self.readings = [self._read()]
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, args=(start,), name="gpubench-nvml", daemon=True
        )
        self._thread.start()

    def _run(self, start: float) -> None:
        try:
            sample_on_grid(
                self._read,
                self.interval_s,
                start,
                self._stop.wait,
                time.perf_counter,
                self.readings,
                self._rng,
            )
        except BaseException as e:  # handed to the measuring thread in stop()
            self._error = e

    def stop(self, failed: bool = False) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        if failed:
            return
        if self._error is not None:
            raise RuntimeError(f"NVML sampling failed: {self._error}") from self._error
        self.readings.append(self._read())
        self.summary = summarise(self.readings)
