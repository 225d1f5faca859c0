from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from report_fixture import (
    CHART_FILES,
    H100,
    convergence_run,
    cpu_gpu_runs,
    env,
    speed_row,
    write_run,
)

from gpubench.cli import main
from gpubench.config.spec import Point
from gpubench.report import build_report
from gpubench.report.html import csp
from gpubench.store.results import read_rows
from gpubench.store.row import make_row

HOSTILE = "<script>alert(1)</script>"


def _images(page: str) -> list[str]:
    return re.findall(r'<img src="([^"]+)"', page)


def test_report_of_cpu_gpu_and_convergence_runs_draws_every_chart(tmp_path: Path) -> None:
    cpu, gpu = cpu_gpu_runs(tmp_path)
    conv = convergence_run(tmp_path)
    path = build_report([cpu, gpu, conv], tmp_path / "out")
    assert path == tmp_path / "out" / "report.html"
    page = path.read_text()
    assert sorted(_images(page)) == sorted(f"plots/{f}" for f in CHART_FILES)
    for f in CHART_FILES:
        png = path.parent / "plots" / f
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size < 250_000  # small enough to commit
    assert "Charts not drawn" not in page
    # The speedup table states the CPU's thread count and names the GPU.
    assert "ran with 2 torch thread(s)" in page and H100["name"] in page
    assert "out of memory" in page.lower() and "oom" in page  # the GPU's failed point is listed


def test_report_of_a_cpu_run_says_there_is_no_gpu_to_compare(tmp_path: Path) -> None:
    cpu, _ = cpu_gpu_runs(tmp_path)
    page = build_report([cpu]).read_text()
    assert (cpu / "report.html").is_file()
    assert "these runs have no GPU rows" in page
    assert "plots/speedup.png" not in page and not (cpu / "plots" / "speedup.png").exists()
    # Absent data is said, not drawn: no memory, MFU or energy on these CPU rows.
    assert "Memory: no memory column was measured" in page
    assert "Energy: no energy figure (no NVML or RAPL reading, no --cpu-watts)" in page
    assert "plots/throughput.png" in page and "plots/step_time.png" in page


def test_a_chart_not_drawn_any_more_does_not_linger_from_an_old_report(tmp_path: Path) -> None:
    cpu, gpu = cpu_gpu_runs(tmp_path)
    out = tmp_path / "out"
    build_report([cpu, gpu], out)
    assert (out / "plots" / "speedup.png").exists()
    build_report([cpu], out)
    assert not (out / "plots" / "speedup.png").exists()


def test_strings_from_results_files_are_escaped(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = [
        speed_row(Point(HOSTILE, "small", "cpu", "fp32", "sgd", b), 1e-3, 1e-5, rng)
        for b in (4, 16)
    ]
    # Two dollar signs around broken TeX: matplotlib must print the name, not parse it.
    rows += [
        speed_row(Point("m$\\frac{$", "small", "cpu", "fp32", "sgd", b), 1e-3, 1e-5, rng)
        for b in (4, 16)
    ]
    rows.append(
        make_row(
            Point(HOSTILE, "small", "cpu", "bf16", "sgd", 4),
            "error",
            error='<img src=x onerror="alert(2)"> & $x^2$',
        )
    )
    hostile_env = env()
    hostile_env["cpu"]["model"] = "</td><script>alert(3)</script>"
    run = write_run(tmp_path / HOSTILE.replace("/", "_"), rows, hostile_env)
    page = build_report([run]).read_text()
    assert page.count("<script") == 1  # the table sorter, and nothing from the results
    assert "<img src=x" not in page and "</td><script>" not in page
    assert html.escape(HOSTILE) in page and "m$\\frac{$" in page
    assert html.escape('<img src=x onerror="alert(2)">') in page
    # The one script runs only by its hash: an injected inline script would not run anyway.
    policy = dict(d.strip().split(" ", 1) for d in csp().split(";"))
    assert policy["script-src"].startswith("'sha256-") and "unsafe" not in policy["script-src"]
    assert f'content="{csp()}"' in page


def test_report_command_and_its_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cpu, gpu = cpu_gpu_runs(tmp_path)
    assert main(["report", str(cpu), str(gpu), "--out", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").is_file() and (tmp_path / "plots" / "speedup.png").is_file()
    assert str(tmp_path / "r.html") in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no results.jsonl" in err


def test_convergence_fields_are_read_from_the_jsonl(tmp_path: Path) -> None:
    conv = convergence_run(tmp_path)
    page = build_report([conv]).read_text()
    assert "plots/loss_curves.png" in page and "plots/time_to_target.png" in page
    rows = [json.loads(line) for line in (conv / "results.jsonl").read_text().splitlines()]
    assert all(isinstance(r["curve"], list) and r["curve"] for r in rows)


TINY = """
name = "tiny"
models = ["mlp"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [2, 8]
precisions = ["fp32"]
optimizers = ["sgd"]
"""


def test_sweep_writes_its_report_and_keeps_its_rows_when_the_report_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    out = tmp_path / "run"
    # no confirmation: the report is the subject (test_folder_answers.py confirms a sweep)
    args = ["--quiet", "--steps", "3", "--no-confirm"]
    assert main(["sweep", str(suite), "--out", str(out), *args]) == 0
    assert (out / "plots" / "throughput.png").is_file()
    assert "mlp" in (out / "report.html").read_text()
    assert "report.html" in capsys.readouterr().out
    # A report that cannot be written (plots/ is a file) costs the report, not the results:
    # the same run resumed (nothing left to measure; it draws its report again) with plots/
    # a file and without its results.csv, which the sweep writes again before the report
    broken = Path(shutil.copytree(out, tmp_path / "broken"))
    shutil.rmtree(broken / "plots")
    (broken / "plots").write_text("not a folder")
    (broken / "results.csv").unlink()
    (broken / "report.html").unlink()
    assert main(["sweep", str(suite), "--resume", str(broken), *args]) == 0
    assert len(read_rows(broken)) == 2 and (broken / "results.csv").is_file()
    assert not (broken / "report.html").exists()
    # one line, whatever the paths' lengths (a pytest-xdist worker's tmp_path once put a line
    # break between "gpubench" and "report"), ending in the command that retries
    (warning,) = [s for s in capsys.readouterr().err.splitlines() if "the report failed" in s]
    assert warning.startswith("gpubench: warning: the report failed (")
    assert warning.endswith(f"; retry with: python -m gpubench report {broken}")
