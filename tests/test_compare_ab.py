"""`gpubench compare --ab BASE_REF` (issue 52): the working tree's code measured against a commit's
in one job, on a git repository made here from this tree's package, with the tiny mlp: a head
whose training step does three steps' work fails naming the point (so the base's processes did
run the base's code), Ctrl-C ends it, and a bad input is one line, exit 2. An unchanged head
passing (A/A) is tests/test_ab_template.py's run of the same gate."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from git_repo import git as _git
from isolation import interruptible

import gpubench
from gpubench.science import regression
from gpubench.store import ab_record
from gpubench.store.typed_json import RecordError

PACKAGE = Path(gpubench.__file__).parent
# one tiny point, one thread (the gate's default), few rounds: seconds of measuring
POINT = ["--models", "mlp", "--size", "tiny", "--batch-sizes", "64", "--threads", "1"]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository whose one commit holds this tree's gpubench package."""
    root = tmp_path_factory.mktemp("ab") / "repo"
    shutil.copytree(PACKAGE, root / "gpubench", ignore=shutil.ignore_patterns("__pycache__"))
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "base")
    return root


def _gate(repo: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m gpubench compare ARGS` run in `cwd` (default: `repo`), importing the
    repository's own gpubench (the head)."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    return subprocess.run(
        [sys.executable, "-m", "gpubench", "compare", *args],
        cwd=cwd or repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


# An unchanged head passing (A/A), each version importing its own tree's gpubench, and the
# record of such a run (its rounds, samples, commits) are checked on the GitHub Actions
# template's run of the gate (tests/test_ab_template.py): a gate of the same tiny point on a
# pull request's clone whose change leaves the code as it was, one gate run fewer here.


def test_a_head_three_times_slower_fails_naming_the_point(repo: Path, tmp_path: Path) -> None:
    step = repo / "gpubench" / "harness" / "step.py"
    text = step.read_text()
    once = "lambda: trainer.step(*batches.next())"
    assert text.count(once) == 1
    thrice = "lambda: [trainer.step(*batches.next()) for _ in 'abc'][-1]"
    step.write_text(text.replace(once, thrice))
    try:
        out = tmp_path / "ab"
        done = _gate(repo, "--ab", "HEAD", *POINT, "--rounds", "6", "--out", str(out))
    finally:
        _git(repo, "checkout", "--", "gpubench/harness/step.py")
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and "mlp/tiny cpu fp32 adamw 1 thread B=64" in failed[0], done.stdout
    record = ab_record.read(out)
    # BASE_REF HEAD is the head's commit; the head's edits are the working tree's
    assert record is not None and record.head_changed
    assert record.base_commit == record.head_commit and record.rounds == 6
    (point,) = record.points
    assert point.reading == "slower" and point.high < 1 / 1.05 and point.ratio < 0.6


def test_ctrl_c_ends_the_gate_and_removes_the_base_export(repo: Path, tmp_path: Path) -> None:
    temp = tmp_path / "temp"  # where the gate exports the base
    temp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(repo), "TMPDIR": str(temp)}
    args = ["compare", "--ab", "HEAD", *POINT, "--out", str(tmp_path / "out")]
    gate = subprocess.Popen(
        [sys.executable, "-m", "gpubench", *args],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,  # Ctrl-C reaches it where pytest ignores SIGINT
    )
    assert gate.stderr is not None
    for line in gate.stderr:  # measuring: both versions' processes run
        if line.startswith("round 1 of"):
            break
    assert [p.name for p in temp.glob("gpubench-ab-*")], "the base is exported there"
    gate.send_signal(signal.SIGINT)
    _, err = gate.communicate(timeout=60)
    assert gate.returncode == 130, err
    assert list(temp.glob("gpubench-ab-*")) == []
    assert not (tmp_path / "out" / ab_record.FILE).exists()


def test_a_base_that_cannot_import_its_own_gpubench_stops_the_gate(tmp_path: Path) -> None:
    # the base commit holds no gpubench: its process must not measure another tree's instead
    root = tmp_path / "repo"
    root.mkdir()
    (root / "README").write_text("before gpubench\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "no package yet")
    shutil.copytree(PACKAGE, root / "gpubench", ignore=shutil.ignore_patterns("__pycache__"))
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "the package")
    done = _gate(root, "--ab", "HEAD~1", *POINT, "--rounds", "6", "--out", str(tmp_path / "o"))
    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("gpubench: error: the base (HEAD~1, "), last
    assert not (tmp_path / "o" / ab_record.FILE).exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--ab", "no-such-branch"], "'no-such-branch'"),
        (["--ab", "HEAD", "--margin", "0"], "--margin '0'"),
        (["--ab", "HEAD", "--rounds", "3"], "--rounds '3'"),
        (["--ab", "HEAD", "runs/a"], "run folder"),
        (["--margin", "5", "runs/a", "runs/b"], "--margin"),
    ],
)
def test_a_bad_input_is_one_line_and_exit_2(
    repo: Path, tmp_path: Path, args: list[str], named: str
) -> None:
    out = tmp_path / "out"
    done = _gate(repo, *args, "--out", str(out)) if "--ab" in args else _gate(repo, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpubench: error:") and named in lines[0]
    assert not out.exists()


def test_outside_a_git_checkout_is_one_line_and_exit_2(repo: Path, tmp_path: Path) -> None:
    done = _gate(repo, "--ab", "HEAD", cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "is not in a git checkout" in line and str(tmp_path) in line


def test_the_judgement_reads_the_ratio_interval_against_the_margin() -> None:
    base = [100.0] * 8
    slower = regression.judge(base, [80.0, 82, 79, 81, 80, 83, 78, 80], 0.05)
    assert slower.reading == "slower" and slower.fails
    assert regression.judge(base, [130.0, 128, 131, 129, 130, 127, 132, 130]).reading == "faster"
    same = regression.judge(base, [99.0, 101, 100, 102, 98, 100, 101, 99])
    assert same.reading == "within the margin" and not same.fails
    wide = regression.judge(base, [60.0, 140, 90, 110, 70, 130, 95, 105])
    assert wide.reading == "cannot tell" and not wide.fails
    with pytest.raises(ValueError, match="margin 0"):
        regression.judge(base, base, 0)
    with pytest.raises(ValueError, match="6 at the least"):
        regression.judge(base[:5], base[:5])


def test_the_record_reads_back_as_written(tmp_path: Path) -> None:
    point = ab_record.ABPoint({"model": "mlp"}, [1.0] * 6, [0.5] * 6, 0.5, 0.4, 0.6, "slower")
    record = ab_record.ABRecord(
        "main", "a" * 40, "b" * 40, True, 0.05, 6, 0.1, 3, 12.5, "/x", "/y", [point], 0.3, False
    )
    record.write(tmp_path)
    again = ab_record.read(tmp_path)
    assert again == record and again.exit_code() == 1
    (tmp_path / ab_record.FILE).write_text(json.dumps({**record.to_dict(), "rounds": "six"}))
    with pytest.raises(RecordError, match="rounds"):
        ab_record.read(tmp_path)
