"""Busy-machine detection: the rule on synthetic load readings, and one real reading beside a
process that spins."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from own_load import foreign_burner

from gpubench.probes import load

QUIET_ENV: dict[str, Any] = {
    "load": {"load_average_1m": 0.1, "cores": 2, "other_load_cores": 0.02},
    "matmul_peaks": {"cpu": {"fp32": {"measured_tflops": 0.1, "round_spread": 0.03}}},
}


@pytest.mark.parametrize(
    ("other", "threads", "cores", "busy"),
    [
        (0.05, 2, 2, False),  # background noise
        (0.9, 2, 2, True),  # one spinning process against torch on both cores
        (0.9, 1, 2, False),  # one thread leaves a core to the spinner
        (1.9, 1, 2, True),  # two spinners: the one thread shares its core
        (0.3, 8, 8, True),
        (None, 2, 2, None),  # unknown stays unknown
    ],
)
def test_contended_compares_others_load_with_the_cores_the_point_leaves_free(
    other: float | None, threads: int, cores: int, busy: bool | None
) -> None:
    assert load.contended(other, threads, cores) is busy


@pytest.mark.parametrize(
    ("device", "threads", "needed"),
    [("cpu", 2, 2), ("cpu", 16, 16), ("cuda", 16, 1), ("cuda:1", 16, 1)],
)
def test_a_cuda_point_needs_the_one_core_that_drives_the_gpu(
    device: str, threads: int, needed: int
) -> None:
    assert load.needed_cores(device, threads) == needed


def test_half_a_core_of_others_does_not_contend_a_cuda_point_on_16_cores() -> None:
    needed = load.needed_cores("cuda", 16)
    assert load.contended(0.45, needed, 16) is False  # the H100's sampler, before issue 28
    assert load.contended(15.5, needed, 16) is True  # others on every core, its one included
    assert load.contended(0.45, load.needed_cores("cpu", 16), 16) is True


def test_a_quiet_machine_gives_no_line() -> None:
    rows = [{"busy": False, "other_load_cores": 0.01}, {"busy": None}]
    assert load.busy_reasons(QUIET_ENV) == []
    assert load.busy_line(QUIET_ENV, rows) is None


def test_a_busy_machine_says_why_in_one_line() -> None:
    env = {
        "load": {"load_average_1m": 3.9, "cores": 2, "other_load_cores": 1.8},
        "matmul_peaks": {"cpu": {"fp32": {"round_spread": 0.45}, "bf16": {"round_spread": 0.5}}},
    }
    rows = [
        {"busy": True, "other_load_cores": 1.7},
        {"busy": True, "other_load_cores": 1.9},
        {"busy": False, "other_load_cores": 0.1},
    ]
    line = load.busy_line(env, rows)
    assert line is not None and "\n" not in line
    assert "load average 3.9 on 2 cores" in line
    assert "1.8 of 2 cores during calibration" in line
    assert "fp32 matmul calibration varied 45%" in line and "bf16" not in line  # said once
    assert "2 of 3 points shared the CPU with other processes (up to 1.9 of 2 cores)" in line


def test_busy_rows_alone_make_the_line() -> None:
    line = load.busy_line(QUIET_ENV, [{"busy": True, "other_load_cores": 1.2}])
    assert line is not None and line.startswith("busy machine: 1 of 1 points")


def test_other_load_reads_a_spinning_process(tmp_path: Path) -> None:
    """The one real reading: a process outside gpubench's tree (a daemon of its own session)
    spins while this one sleeps, so the machine's busy time is the spinner's (and whatever else
    runs), none of it this process's own. (A child of this process would be gpubench's own:
    tests/test_process_tree.py.)"""
    with foreign_burner(-1.0, tmp_path / "done"):
        time.sleep(0.2)  # let it start
        with load.OtherLoad() as others:
            time.sleep(0.5)
    assert others.cores is not None and others.cores >= 0.5


def test_a_window_too_short_to_tell_is_unknown() -> None:
    with load.OtherLoad() as others:
        pass
    assert others.cores is None
