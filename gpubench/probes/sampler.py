"""A sampler on a fixed grid of slots, not a sleep after each reading: slot k starts at
`start + k * interval`, so the rate is 1 / interval for any reading shorter than the slot (a sleep
after each 4-8 ms H100 reading gave 56-71 Hz for 100). A reading that overruns its slot skips the
slots it covered, never bursts to catch up; the summary's `sample_hz` is the rate achieved.

Each reading falls at a uniformly random point of its slot: a training loop's power is periodic,
and a grid in step with it would read the same phase every time, biasing the power integral
while the readings agree. Random points make a stratified sample, which probes.energy's error
bound assumes.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable

from gpubench.probes.nvml_readings import Reading, Summary, summarise
from gpubench.probes.probe import Probe

# 100 Hz: an H100 reading's 4-8 ms fits in a slot
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
    """Reads once on entry, once per `interval_s` slot on a daemon thread (sample_on_grid), and
    once on exit, then sets `summary`; an error of the reading function is raised on exit.
    `seed` fixes the readings' places in their slots (None: a fresh seed)."""

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
