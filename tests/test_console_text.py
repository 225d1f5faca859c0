"""What the console prints is text: brackets from a result, a suite or an exception are printed
as they are, never parsed as rich markup (which loses text, or crashes on a stray "[/]")."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gpubench.cli import console
from gpubench.config.spec import Point, SweepSpec
from gpubench.store.row import make_row

OOM = "out of memory [2 GiB] [bold]x"
BAD = "KeyError: '[/]'"


def test_summary_progress_and_failures_print_brackets_verbatim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = SweepSpec("odd[/]name", ("mlp",), devices=("cpu",))
    rows = [
        make_row(Point("mlp", "tiny", "cpu", "fp32", "sgd", 16), "oom", error=OOM),
        make_row(Point("mlp", "tiny", "cpu", "fp32", "sgd", 32), "error", error=BAD),
    ]
    progress = console.SweepProgress(spec, tmp_path / "[red]run", quiet=False)
    progress.on_start(2, 0)
    for i, row in enumerate(rows, start=1):
        progress.on_row(row, i, 2)
    progress.stop()
    console.sweep_summary(pd.DataFrame(rows), tmp_path, convergence=False)
    console.report_failed(tmp_path, RuntimeError("bad [/] markup [link]"))
    out, err = capsys.readouterr()
    assert "'odd[/]name'" in err and "[red]run" in err
    assert "bad [/] markup [link]" in err
    assert "out of memory [2 GiB] [bold]x" in out
    assert BAD in out
