"""The report opened in headless Chromium (Debian's chromium); skipped where it is absent."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from report_fixture import CHART_FILES, convergence_run, cpu_gpu_runs, env, speed_row, write_run

from gpubench.config.spec import Point
from gpubench.report import build_report

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check_report.py"
CHROMIUM = next(
    (shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None
)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


def _check(report: Path, screenshot: Path | None = None) -> tuple[int, dict[str, Any]]:
    args = [sys.executable, str(SCRIPT), str(report), "--json"]
    if screenshot is not None:
        args += ["--screenshot", str(screenshot)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_the_report_loads_every_image_and_makes_no_network_request(tmp_path: Path) -> None:
    cpu, gpu = cpu_gpu_runs(tmp_path)
    report = build_report([cpu, gpu, convergence_run(tmp_path)], tmp_path / "out")
    shot = tmp_path / "shot.png"
    rc, seen = _check(report, shot)
    assert rc == 0, seen["failures"]
    assert len(seen["images"]) == len(CHART_FILES) and all(
        i["complete"] and i["width"] > 0 for i in seen["images"]
    )
    assert seen["requests"] and seen["console_errors"] == [] and seen["scripts"] == 1
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and seen["page_height_px"] > 3000


def test_the_checker_catches_a_missing_image_and_an_outside_request(tmp_path: Path) -> None:
    cpu, _ = cpu_gpu_runs(tmp_path)
    page = build_report([cpu]).read_text()
    broken = cpu / "broken.html"
    broken.write_text(
        page.replace("plots/step_time.png", "plots/gone.png").replace(
            'src="plots/throughput.png"', 'src="http://192.0.2.1/x.png"'
        )
    )
    rc, seen = _check(broken)
    assert rc == 1
    text = "\n".join(seen["failures"])
    assert "image did not load: plots/gone.png" in text
    assert "request outside the report's folder: http://192.0.2.1/x.png" in text


def test_a_script_in_a_model_name_renders_as_text(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    name = "<script>alert(1)</script>"
    rows = [
        speed_row(Point(name, "small", "cpu", "fp32", "sgd", b), 1e-3, 1e-5, rng) for b in (4, 16)
    ]
    report = build_report([write_run(tmp_path / "hostile", rows, env())])
    rc, seen = _check(report)
    assert rc == 0, seen["failures"]  # no dialog, no console error, one script (the sorter)
    assert seen["scripts"] == 1
