"""The report writes and deletes only its own (issue 50): in plots/ it removes only charts an
earlier report of gpubench drew there and this one does not draw again (plots/gpubench-charts.json
records them), and SIGTERM or Ctrl-C while it draws ends its chart workers, says what stopped in
one line with the command that draws it again, and exits 143 or 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from isolation import interruptible
from report_fixture import cpu_gpu_runs

from gpubench.report import build_report
from gpubench.report.chart_record import FILE

PNG = b"\x89PNG\r\n\x1a\n"


def test_the_report_leaves_pngs_it_did_not_draw(tmp_path: Path) -> None:
    cpu, _ = cpu_gpu_runs(tmp_path)
    out = tmp_path / "page"
    plots = out / "plots"
    plots.mkdir(parents=True)
    # a user's own charts beside the page: names a report draws in other folders
    mine = {
        name: PNG + name.encode()
        for name in ("search_old.png", "search.png", "speedup.png", "scaling.png", "energy.png")
    }
    for name, data in mine.items():
        (plots / name).write_bytes(data)
    page = build_report([cpu], out / "page.html").read_text()
    assert "plots/throughput.png" in page
    for name, data in mine.items():  # a CPU run draws none of these: none is touched
        assert (plots / name).read_bytes() == data, name
    assert json.loads((plots / FILE).read_text())["charts"] == sorted(
        p.name for p in plots.glob("*.png") if p.name not in mine
    )


def test_a_chart_an_earlier_report_drew_is_removed_and_only_that(tmp_path: Path) -> None:
    cpu, gpu = cpu_gpu_runs(tmp_path)
    out = tmp_path / "out"
    build_report([cpu, gpu], out)
    plots = out / "plots"
    assert (plots / "speedup.png").exists() and (plots / "memory.png").exists()
    (plots / "throughput_mine.png").write_bytes(PNG)
    build_report([cpu], out)  # no GPU run: no speedup, no memory chart
    assert not (plots / "speedup.png").exists() and not (plots / "memory.png").exists()
    assert (plots / "throughput_mine.png").exists() and (plots / "throughput.png").exists()


def test_a_chart_record_naming_files_outside_plots_removes_nothing_there(tmp_path: Path) -> None:
    cpu, _ = cpu_gpu_runs(tmp_path)
    out = tmp_path / "out"
    (out / "plots").mkdir(parents=True)
    victim = tmp_path / "victim.png"
    victim.write_bytes(PNG)
    (out / "notes.txt").write_text("mine")
    crafted = {"charts": ["../../victim.png", str(victim), "../notes.txt", 7, "speedup.png"]}
    (out / "plots" / FILE).write_text(json.dumps(crafted))
    build_report([cpu], out)
    assert victim.exists() and (out / "notes.txt").exists()


def test_a_plots_folder_without_a_record_has_nothing_removed(tmp_path: Path) -> None:
    """A report of a folder drawn before the record existed: its old charts stay (it cannot tell
    them from a user's); the record written now lets the next report remove them."""
    cpu, gpu = cpu_gpu_runs(tmp_path)
    out = tmp_path / "out"
    build_report([cpu, gpu], out)
    (out / "plots" / FILE).unlink()
    build_report([cpu], out)
    assert (out / "plots" / "speedup.png").exists()


def _children(pid: int) -> list[int]:
    """The pids of `pid`'s children (Linux /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text() if (task / "children").exists() else ""
        found += [int(c) for c in text.split()]
    return found


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, its exit not yet collected, has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _stopped_report(tmp_path: Path, sig: signal.Signals) -> tuple[int, str, list[int]]:
    """`python -m gpubench report` of a small real folder, sent `sig` once its chart workers
    exist: its exit status, its stderr and the workers' pids."""
    cpu, gpu = cpu_gpu_runs(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpubench", "report", str(cpu), str(gpu)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=interruptible,  # Ctrl-C reaches it where pytest ignores SIGINT
    )
    workers: list[int] = []
    deadline = time.monotonic() + 120
    while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:
        workers = _children(proc.pid)
        time.sleep(0.02)
    assert len(workers) >= 2, "the report drew no charts in workers"
    time.sleep(0.3)  # they are drawing
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc.returncode, err, workers


def test_sigterm_while_the_report_draws_ends_its_workers_in_one_line(tmp_path: Path) -> None:
    code, err, workers = _stopped_report(tmp_path, signal.SIGTERM)
    assert code == 143, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "stopped (SIGTERM) while drawing the report" in lines[0]
    assert f"python -m gpubench report {tmp_path / 'cpu'} {tmp_path / 'gpu'}" in lines[0]
    assert not [w for w in workers if _alive(w)]


def test_ctrl_c_while_the_report_draws_ends_its_workers_in_one_line(tmp_path: Path) -> None:
    code, err, workers = _stopped_report(tmp_path, signal.SIGINT)
    assert code == 130, err
    assert err.strip().count("\n") == 0 and "stopped (Ctrl-C)" in err, err
    assert not [w for w in workers if _alive(w)]
