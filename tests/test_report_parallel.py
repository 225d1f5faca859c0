"""The report draws its charts in parallel processes: the same page and the same PNGs as drawn
in turn, every chart drawn once, and a chart's error raised as ever."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from report_fixture import CHART_FILES, convergence_run, cpu_gpu_runs

from gpubench.report import build


def _report(runs: list[Path], out: Path, processes: int, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(build, "CHART_PROCESSES", processes)
    return build.build_report(runs, out)


def _undated(page: str) -> str:
    """The page without its generation time (minutes may turn between two reports)."""
    return re.sub(r"Generated [^<]* UTC", "Generated", page)


def test_charts_drawn_in_parallel_make_the_same_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpu, gpu = cpu_gpu_runs(tmp_path)
    runs = [cpu, gpu, convergence_run(tmp_path)]
    serial = _report(runs, tmp_path / "serial", 1, monkeypatch)
    parallel = _report(runs, tmp_path / "parallel", 2, monkeypatch)
    assert _undated(parallel.read_text()) == _undated(serial.read_text())
    pngs = sorted(p.name for p in (serial.parent / "plots").glob("*.png"))
    assert pngs == sorted(p.name for p in (parallel.parent / "plots").glob("*.png"))
    assert set(pngs) == set(CHART_FILES)
    for name in pngs:
        drawn = (parallel.parent / "plots" / name).read_bytes()
        assert drawn == (serial.parent / "plots" / name).read_bytes(), name


def _job(folder: Path, i: int) -> int:
    """A job that leaves a file saying which process ran it, and returns its index squared."""
    (folder / f"{i}-{os.getpid()}").touch()
    return i * i


def test_every_job_runs_once_and_values_keep_their_order(tmp_path: Path) -> None:
    makes = [lambda i=i: _job(tmp_path, i) for i in range(12)]
    assert build.made_in_parallel(makes, 2) == [i * i for i in range(12)]
    ran = sorted(int(p.name.split("-")[0]) for p in tmp_path.iterdir())
    assert ran == list(range(12))


def test_one_core_draws_in_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "_cores", lambda: 1)
    makes = [lambda i=i: _job(tmp_path, i) for i in range(4)]
    assert build.made_in_parallel(makes, 2) == [0, 1, 4, 9]
    assert {p.name.split("-")[1] for p in tmp_path.iterdir()} == {str(os.getpid())}


@pytest.mark.parametrize("failing", [0, 5, 11])
def test_a_failing_job_raises_its_error(tmp_path: Path, failing: int) -> None:
    def make(i: int) -> int:
        if i == failing:
            raise ValueError(f"chart {i} has no data")
        return _job(tmp_path, i)

    makes = [lambda i=i: make(i) for i in range(12)]
    with pytest.raises(ValueError, match=f"chart {failing} has no data"):
        build.made_in_parallel(makes, 2)
