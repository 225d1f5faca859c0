"""The report of a run measured on a busy machine says so, and marks the rows; columns a CPU
run never fills are left out of its summary."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from report_fixture import env, speed_row, write_run

from gpubench.config.spec import Point
from gpubench.report import build_report


def _cpu_run(path: Path, busy: bool) -> Path:
    rng = np.random.default_rng(0)
    rows = [
        speed_row(
            Point("mlp", "small", "cpu", "fp32", "sgd", b),
            1e-3,
            1e-5,
            rng,
            busy=busy and b == 64,
            other_load_cores=1.8 if busy and b == 64 else 0.02,
        )
        for b in (16, 64)
    ]
    load = {"load_average_1m": 3.2 if busy else 0.1, "cores": 2, "other_load_cores": 0.0}
    return write_run(path, rows, env() | {"load": load})


def test_a_busy_run_has_its_line_and_marked_rows(tmp_path: Path) -> None:
    page = build_report([_cpu_run(tmp_path / "busy", busy=True)]).read_text()
    assert "busy machine: load average 3.2 on 2 cores" in page
    assert "1 of 2 points shared the CPU" in page
    assert "<th>busy</th>" in page and "<td>busy</td>" in page


def test_a_quiet_run_has_neither_and_no_empty_summary_columns(tmp_path: Path) -> None:
    page = build_report([_cpu_run(tmp_path / "quiet", busy=False)]).read_text()
    assert "busy machine" not in page and "<th>busy</th>" not in page
    start = page.index("<h2>Summary</h2>")
    summary = page[start : page.index("<h2>", start + 1)]
    assert "<th>first OOM batch</th>" not in summary
    assert "Not measured in these runs, so not shown: " in summary
    assert "<th>best samples/s</th>" in summary
