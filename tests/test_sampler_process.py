"""NVML sampling runs in a process of its own: the measuring process only starts and stops it.
Tested on the CPU with fake reading functions in that process."""

from __future__ import annotations

import os
import time

import pytest

from gpubench.probes.nvml_readings import summarise
from gpubench.probes.sampler_process import ProcessSampler


def test_readings_are_taken_in_another_process_over_the_window() -> None:
    with ProcessSampler("fake_nvml:stepped_counter", (300.0, 0.1), interval_s=0.01) as s:
        started = time.perf_counter()
        time.sleep(0.5)
        ended = time.perf_counter()
    assert s.pid is not None and s.pid != os.getpid()
    assert {r.process_used_bytes for r in s.readings} == {s.pid}
    # the first reading before the window's work, the last after it, in time order
    assert s.readings[0].t_s <= started and s.readings[-1].t_s >= ended
    assert [r.t_s for r in s.readings] == sorted(r.t_s for r in s.readings)
    assert len(s.readings) >= 3 and s.summary == summarise(s.readings)
    assert s.summary.avg_power_w == pytest.approx(300.0)
    # 0.5 s of a counter that moves every 100 ms: its error bound is several percent, while a
    # steady 300 W integrates exactly
    assert s.summary.energy_method == "power_integral" and s.summary.energy_error_rel == 0.0
    assert s.summary.energy_j == pytest.approx(300.0 * s.summary.duration_s)


def test_a_reading_that_fails_is_raised_on_exit() -> None:
    with (
        pytest.raises(RuntimeError, match="fell off the bus"),
        ProcessSampler("fake_nvml:failing_after", (1,), interval_s=0.001),
    ):
        time.sleep(0.2)


def test_a_sampler_that_cannot_start_says_why() -> None:
    with (
        pytest.raises(RuntimeError, match=r"failed to start.*no_such_module"),
        ProcessSampler("no_such_module:reader"),
    ):
        pass
