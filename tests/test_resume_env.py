"""A resume checks the machine from the folder's env.json; a folder whose env.json is gone but
which holds rows cannot show they were measured here, so it is refused (a careful user would
rather restore the file than mix two machines' rows unseen). Without rows nothing can mix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpubench.cli.main import main


def test_a_folder_with_rows_but_no_env_json_is_refused(
    finished_sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = Path(shutil.copytree(finished_sweep, tmp_path / "run"))  # the session's, copied
    (out / "env.json").unlink()
    before = (out / "results.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["sweep", "--resume", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "holds rows but no env.json" in err and "restore its env.json" in err
    assert (out / "results.jsonl").read_bytes() == before
    assert not (out / "env.json").exists()
    # without rows (the sweep stopped before measuring) the resume goes on and captures it
    (out / "results.jsonl").unlink()
    assert main(["sweep", "--resume", str(out), "--quiet"]) == 0
    assert (out / "env.json").is_file() and (out / "results.jsonl").read_bytes().strip()
