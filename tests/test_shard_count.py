"""A shard count the suite cannot fill (`--shard 1/99999999999999999999` once was a traceback
that also left a shard.json no resume could read past): one line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpubench.cli.main import main

TINY = [
    "--models", "mlp", "--size", "tiny", "--devices", "cpu", "--batch-sizes", "4,8",
    "--precisions", "fp32", "--optimizers", "sgd", "--steps", "2", "--quiet",
]  # fmt: skip


@pytest.mark.parametrize("text", ["1/99999999999999999999", "1/3"])
def test_a_shard_count_above_the_suites_series_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    out = tmp_path / "run"
    assert main(["sweep", "quick", *TINY, "--shard", text, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert f"invalid shard {text}" in err and "allowed: i/n with 1 <= i <= n <= 2" in err
    assert not out.exists()


def test_a_folder_that_holds_such_a_shard_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder an older gpubench left with an impossible shard.json: its resume says so."""
    out = tmp_path / "run"
    assert main(["sweep", "quick", *TINY, "--shard", "1/2", "--out", str(out)]) == 0
    rows = (out / "results.jsonl").read_text()
    (out / "shard.json").write_text(json.dumps({"index": 1, "count": 99999999999999999999}))
    capsys.readouterr()
    assert main(["sweep", "--resume", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "invalid shard 1/99999999999999999999" in err
    assert (out / "results.jsonl").read_text() == rows
