"""The sampler keeps the rate it promises: its schedule (probes.sampler.sample_on_grid) run on a
fake clock, so the counts are exact and nothing here depends on this machine's timing."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from fake_nvml import FakeClock

from gpubench.probes.nvml_readings import Reading, summarise
from gpubench.probes.sampler import first_open_slot, sample_on_grid

INTERVAL = 0.01


def _schedule(read_s: float, stop_s: float = 1.0, seed: int = 0) -> list[float]:
    """The start times of the grid's readings over [0, stop_s) with readings of `read_s`."""
    fake = FakeClock(read_s, stop_s, lambda t: Reading(t_s=t))
    out: list[Reading] = []
    sample_on_grid(fake.read, INTERVAL, 0.0, fake.wait, fake.clock, out, random.Random(seed))
    return [r.t_s for r in out]


def _slot(t: float) -> int:
    return math.floor(t / INTERVAL + 1e-9)


def test_first_open_slot() -> None:
    assert first_open_slot(0.0, INTERVAL, 0.0) == 1  # slot 0 is the reading on entry
    assert first_open_slot(0.0, INTERVAL, 0.015) == 1
    assert first_open_slot(0.0, INTERVAL, 0.0251) == 2
    assert first_open_slot(5.0, INTERVAL, 5.1234) == 12


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_8_ms_reading_keeps_100_hz(seed: int) -> None:
    starts = _schedule(read_s=0.008, seed=seed)
    # one reading in each slot 1..99 of the 1 s window (slot 0 is the reading on entry);
    # sleeping 10 ms after each 8 ms reading would have made 1 / 18 ms = 55 of them
    assert [_slot(t) for t in starts] == list(range(1, 100))
    s = summarise([Reading(t_s=0.0), *(Reading(t_s=t) for t in starts), Reading(t_s=1.0)])
    assert s.sample_hz == pytest.approx(100.0)


def test_readings_fall_at_varied_points_of_their_slots() -> None:
    # what the power integral's error bound assumes (probes.energy): not one fixed phase
    offsets = [t / INTERVAL - _slot(t) for t in _schedule(read_s=0.001)]
    assert min(offsets) < 0.1 and max(offsets) > 0.9
    assert _schedule(read_s=0.001, seed=1) != _schedule(read_s=0.001, seed=2)


def test_a_reading_longer_than_its_slot_skips_slots_without_a_burst() -> None:
    read_s = 0.014
    starts = _schedule(read_s=read_s)
    slots = [_slot(t) for t in starts]
    assert len(set(slots)) == len(slots)  # never two readings in one slot
    assert all(b - a >= read_s - 1e-12 for a, b in itertools.pairwise(starts))
    # a reading that starts anywhere in slot k ends before slot k + 2 ends: at most one slot
    # is skipped between two readings, so at least every other slot has one
    assert all(b - a <= 2 for a, b in itertools.pairwise(slots))
    assert 1 / (2 * INTERVAL) - 1 <= len(starts) <= 1 / read_s
