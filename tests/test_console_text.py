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


def test_counts_and_ratios_read_as_english(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpubench.science.verdict import _batch_scaling
    from gpubench.store.wording import cell, number, plural, times

    assert (plural(1, "point"), plural(0, "point"), plural(2, "batch", "batches")) == (
        "1 point",
        "0 points",
        "2 batches",
    )
    assert [times(x) for x in (100.0, 1.94, 253.0, 0.5)] == ["x100", "x1.94", "x253", "x0.500"]
    assert (number(1234.5), number(999.7), number(0.01234), cell(12345.0, ".3g")) == (
        "1,234",
        "1,000",
        "0.0123",
        "12,345",
    )
    rows = [
        make_row(Point("mlp", "tiny", "cpu", "fp32", "sgd", b), "ok", step_time_s=t)
        for b, t in ((1, 0.001), (256, 0.1))
    ]
    assert "(x100) from B=1 to B=256" in str(_batch_scaling(rows[0], rows))
    progress = console.SweepProgress(SweepSpec("one", ("mlp",), devices=("cpu",)), tmp_path, True)
    progress.on_start(1, 0)
    progress.stop()
    assert "'one', 1 point on cpu" in capsys.readouterr().err


def test_progress_and_max_batch_lines_are_never_wrapped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # in a log (stderr no terminal) each line is whole, however long: rich wraps at 80 columns
    from gpubench.run.batch_search import Probe

    name = "timm:" + "x" * 80  # a long label
    point = Point(name, "tiny", "cpu", "fp32", "sgd", 16)
    row = make_row(point, "oom", error=OOM)
    spec = SweepSpec("quick", ("mlp",), devices=("cpu",))
    progress = console.SweepProgress(spec, tmp_path, quiet=False)
    progress.on_row(row, 1, 1)
    progress.stop()
    console.max_batch_header(point, 2**30, chosen=False)
    console.probe_line(Probe(16384, "oom", None, 123.4, "search"))
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert any(line.startswith("[1/1] ") and line.endswith(": oom") for line in lines), err
    assert any(line.startswith("gpubench: largest batch of timm:x") for line in lines)
    assert all(len(line) > 80 for line in lines if name in line)
    assert "   search B=16384: oom (123 s)" in lines
