"""A sweep records where its time went (phases.json), and the breakdown splits it per phase and
per part of a point without losing or inventing time."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from sweep_phases import breakdown, table

from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.run import phases
from gpubench.run.sweep import run_sweep
from gpubench.store import phases_record
from gpubench.store.row import make_row

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real two-point sweep of a tiny model with its confirmation."""
    run = tmp_path_factory.mktemp("phases") / "run"
    # a module the sweep's caller needs afterwards, imported while the worker starts
    (run.parent / f"{PREPARED}.py").write_text(
        "import threading, time\nTHREAD = threading.current_thread().name\nDONE = time.time()\n"
    )
    sys.path.insert(0, str(run.parent))
    spec = SweepSpec(
        name="t",
        models=("mlp",),
        size="tiny",
        devices=("cpu",),
        batch_sizes=(4, 8),
        budget=Budget.fixed(steps=3, warmup_steps=1),
    )
    with warnings.catch_warnings():  # where NVML is missing the sweep says so once
        warnings.simplefilter("ignore")
        try:
            run_sweep(spec, run, prepare=(PREPARED,))
        finally:
            sys.path.remove(str(run.parent))
    return run


PREPARED = "gpubench_test_prepared_module"


def test_the_callers_modules_are_imported_meanwhile_and_done_before_calibrating(
    swept: Path,
) -> None:
    module = sys.modules[PREPARED]
    assert module.THREAD == "gpubench-imports"  # not in the sweep's own thread
    record = phases_record.read(swept)
    assert record is not None
    calibration = next(p for p in record.phases if p.phase == "calibration")
    assert calibration.start >= module.DONE


def test_a_sweep_records_its_phases_in_order(swept: Path) -> None:
    data = phases_record.read(swept)
    assert data is not None
    names = [p.phase for p in data.phases]
    assert names == ["model checks", "calibration", "plan", "points", "results.csv"] + (
        # the reference probes again after the confirmation (issue 52)
        ["confirmation", "end probes"] if (swept / "confirm.json").is_file() else []
    )
    bounds = [data.started] + [t for p in data.phases for t in (p.start, p.end)]
    assert bounds == sorted(bounds)  # one after another, none overlapping
    assert [p.point for p in data.points] == [
        "mlp cpu fp32 sgd B=4",
        "mlp cpu fp32 sgd B=8",
    ]
    for p in data.points:
        assert p.start <= p.end <= p.written
    # the worker that took the model check steps measures the points: none starts meanwhile
    assert [p.worker_s for p in data.points] == [0, 0]


def test_the_breakdown_accounts_for_the_points_phase(swept: Path) -> None:
    parts = dict(breakdown(swept))
    inside = sum(s for name, s in parts.items() if name.startswith("  "))
    assert inside == pytest.approx(parts["points"], rel=1e-6)
    rows = [json.loads(line) for line in (swept / "results.jsonl").read_text().splitlines()]
    assert parts["  measuring windows"] == pytest.approx(sum(r["wall_time_s"] for r in rows))
    assert parts["  warm-up (counting step included)"] == pytest.approx(
        sum(r["warmup_time_s"] for r in rows)
    )
    assert "start-up (interpreter, imports, parse)" not in parts  # no launch time given


def test_start_up_and_exit_come_from_the_callers_clock(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    t0 = 1000.0
    log = {
        "started": t0 + 2.0,
        "phases": [
            {"phase": "model checks", "start": t0 + 2.0, "end": t0 + 3.0},
            {"phase": "points", "start": t0 + 3.0, "end": t0 + 10.0},
        ],
        "points": [
            {"point": "mlp cpu fp32 sgd B=4", "start": t0 + 3.5, "end": t0 + 6.0,
             "written": t0 + 6.5, "worker_s": 0.5},
        ],
    }  # fmt: skip
    (run / phases_record.FILE).write_text(json.dumps(log))
    point = Point("mlp", "small", "cpu", "fp32", "sgd", 4)
    row = make_row(point, "ok", point_time_s=1.5, warmup_time_s=0.25, wall_time_s=0.75)
    (run / "results.jsonl").write_text(json.dumps(row) + "\n")
    parts = dict(breakdown(run, launched=t0, ended=t0 + 12.0))
    assert parts["start-up (interpreter, imports, parse)"] == pytest.approx(2.0)
    assert parts["  worker start (fork, imports)"] == pytest.approx(0.5)
    assert parts["  warm-up (counting step included)"] == pytest.approx(0.25)
    assert parts["  measuring windows"] == pytest.approx(0.75)
    assert parts["  build, counting step, probes, profile analysis, row"] == pytest.approx(0.5)
    assert parts["  hand-off (load check, gc, transfer)"] == pytest.approx(0.5)  # 2.5 - 0.5 - 1.5
    assert parts["  row write and progress line"] == pytest.approx(0.5)
    assert parts["  between points"] == pytest.approx(4.0)  # 7 s phase, 3 s of it the point
    assert parts["verdict and exit"] == pytest.approx(2.0)  # no report: from the last phase
    text = table(breakdown(run, launched=t0, ended=t0 + 12.0))
    assert text.splitlines()[-1].split()[-2:] == ["12.00", "100%"]


def test_the_script_prints_a_folders_table(swept: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "sweep_phases.py"), "--from", str(swept)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["phase", "seconds", "share"]
    assert any(line.startswith("points ") for line in lines)
    assert lines[-1].startswith("total")


def test_a_phase_that_raises_is_recorded(tmp_path: Path) -> None:
    log = phases.PhaseLog()
    log.attach(tmp_path)
    with pytest.raises(RuntimeError), log.phase("calibration"):
        time.sleep(0.01)
        raise RuntimeError("calibration failed")
    record = phases_record.read(tmp_path)
    assert record is not None and [p.phase for p in record.phases] == ["calibration"]


def test_the_report_phase_is_the_one_the_command_recorded(tmp_path: Path) -> None:
    # A report.html re-rendered hours later must not count as the sweep's report phase (its
    # modification time once read 10,738 s of "report" for a 50 s sweep).
    run = tmp_path / "run"
    run.mkdir()
    log = {"started": 100.0, "phases": [{"phase": "points", "start": 100.0, "end": 110.0}],
           "points": []}  # fmt: skip
    (run / phases_record.FILE).write_text(json.dumps(log))
    (run / "results.jsonl").write_text("")
    (run / "report.html").write_text("<html></html>")
    assert phases.REPORT_PHASE not in dict(breakdown(run))
    phases.add_phase(run, phases.REPORT_PHASE, 110.0, 112.5)
    parts = dict(breakdown(run, launched=99.0, ended=113.0))
    assert parts[phases.REPORT_PHASE] == pytest.approx(2.5)
    assert parts["verdict and exit"] == pytest.approx(0.5)
    phases.add_phase(tmp_path / "elsewhere", phases.REPORT_PHASE, 0.0, 1.0)  # no phases.json
    assert not (tmp_path / "elsewhere").exists()
