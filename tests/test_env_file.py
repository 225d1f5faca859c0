"""A run folder's env.json has one reader (store.env.read): a file that is not the JSON object
gpubench writes is the same one line naming it in every command that reads it (report,
explain, merge, a resume), and that line changes nothing in the folder (compare reads only
rows)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from report_fixture import speed_row

from gpubench.cli.main import main
from gpubench.config.spec import Point
from gpubench.run.folder import LOCK_NAME

# What a crash, a full disk or a stray editor could leave: a file cut short, and JSON that is
# not an object.
BAD = {"cut short": b'{"cpu": ', "a list": b"[1, 2]"}


def _rows_line(n: int) -> bytes:
    rng = np.random.default_rng(0)
    points = [Point("mlp", "tiny", "cpu", "fp32", "sgd", 2**i) for i in range(n)]
    rows = [speed_row(p, 1e-3, 1e-4, rng, n=5) for p in points]
    return b"".join((json.dumps(r, allow_nan=False) + "\n").encode() for r in rows)


def _folder(path: Path, env_bytes: bytes) -> Path:
    """A run folder with two rows, the suite a resume reads, and env.json holding `env_bytes`."""
    path.mkdir(parents=True)
    (path / "results.jsonl").write_bytes(_rows_line(2))
    (path / "suite.json").write_text(json.dumps({"name": "quick", "models": ["mlp"]}))
    (path / "env.json").write_bytes(env_bytes)
    return path


def _contents(path: Path) -> dict[str, bytes]:
    """Every file of `path` but the lock file a resume takes (it stays, by design)."""
    files = sorted(f for f in path.rglob("*") if f.name != LOCK_NAME)
    return {str(f.relative_to(path)): f.read_bytes() for f in files}


def _argv(command: str, run: Path, tmp_path: Path) -> list[str]:
    if command == "merge":
        good = tmp_path / "good"
        good.mkdir()
        (good / "results.jsonl").write_bytes(_rows_line(1))
        (good / "env.json").write_text(json.dumps({"hostname": "test-host"}))
        return ["merge", str(good), str(run), "--out", str(tmp_path / "merged")]
    if command == "resume":
        return ["sweep", "--resume", str(run), "--quiet"]
    return [command, str(run)]


def _error(run: Path, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The one line `command` prints on `run`, checking that it exits 2 and leaves `run` as
    it was (and writes no merged folder)."""
    before = _contents(run)
    capsys.readouterr()
    assert main(_argv(command, run, tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert _contents(run) == before
    assert not (tmp_path / "merged").exists()
    return err


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
@pytest.mark.parametrize("command", ["report", "explain", "merge", "resume"])
def test_an_env_json_that_is_not_an_object_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, bad: bytes
) -> None:
    run = _folder(tmp_path / "run", bad)
    err = _error(run, command, tmp_path, capsys)
    assert err.startswith(f"gpubench: error: cannot read {str(run / 'env.json')!r}: "), err
    assert "it must be a JSON object as gpubench writes it" in err, err
    assert "restore it from a copy" in err, err


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_every_command_says_the_same_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: bytes
) -> None:
    run = _folder(tmp_path / "run", bad)
    lines = {c: _error(run, c, tmp_path, capsys) for c in ("explain", "merge", "resume")}
    assert len(set(lines.values())) == 1, lines


def test_a_folder_without_env_json_reads_as_empty_and_an_object_as_itself(
    tmp_path: Path,
) -> None:
    from gpubench.store import env

    assert env.read(tmp_path) == {}
    (tmp_path / env.ENV_FILE).write_text(json.dumps({"hostname": "h", "cpu": {"model": "C"}}))
    assert env.read(tmp_path) == {"hostname": "h", "cpu": {"model": "C"}}
