"""Issue 25's report section: samples/s and peak memory against the effective batch, a line per
(accumulate, checkpoint) way, shown only where a run swept those axes (synthetic rows)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
from report_fixture import env, write_run
from test_effective_batch import way

from gpubench.report import build_report
from gpubench.report.effective_batch import CHART_FILE, choice_rows
from gpubench.report.runs import combine, load_runs


def swept() -> list[dict]:
    rows = []
    for b in (128, 512):
        rows += [
            way(1, "none", None if b == 512 else 900.0, 800.0 * b / 128, b=b),
            way(4, "none", 1000.0, 250.0 * b / 128, b=b),
            way(2, "blocks", 830.0, 150.0 * b / 128, b=b),
        ]
    return rows


def test_a_swept_run_draws_a_line_per_way_and_tables_each_effective_batch(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", swept(), env(), suite={"name": "accumulate"})
    page = build_report([run]).read_text()
    assert "<h2>Effective batch</h2>" in page and f"plots/{CHART_FILE}" in page
    png = run / "plots" / CHART_FILE
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = choice_rows(combine(load_runs([run])))
    assert sorted(rows["line"].unique()) == [
        "as 1 micro-batch",
        "as 2 micro-batches, checkpoint blocks",
        "as 4 micro-batches",
    ]
    # the table: every way at each effective batch, the failed one by its status
    for text in ("as 4 x 128", "as 2 x 256, checkpoint blocks", "as 1 x 512", "oom"):
        assert text in page


def test_a_run_without_the_axes_has_no_section_and_no_stale_chart(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", swept(), env(), suite={"name": "accumulate"})
    build_report([run])
    plain = [way(1, "none", 900.0 * b / 64, 300.0 * b / 64, b=b) for b in (64, 128)]
    out = tmp_path / "out"
    out.mkdir()
    # an earlier report drew the chart there (its record lists it): this one removes it
    shutil.copytree(run / "plots", out / "plots")
    page = build_report([write_run(tmp_path / "plain", plain, env())], out).read_text()
    assert "Effective batch" not in page
    assert not (out / "plots" / CHART_FILE).exists()
    assert choice_rows(pd.DataFrame(plain)).empty
