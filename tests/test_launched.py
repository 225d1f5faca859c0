"""A sweep launched by torchrun (here --standalone, two gloo ranks on this machine): rank 0
alone writes the rows, and a rank that fails ends the launch with a row naming it; a launch into
that folder from another machine is refused as `--resume` refuses it, and so is one into a folder
in use."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpubench.run import folder
from gpubench.store.results import read_rows

TESTS = Path(__file__).resolve().parent
SUITE = """
name = "launched"
models = ["mlp", "rank_faults:raises", "cnn"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [4]
optimizers = ["sgd"]
parallel = ["ddp"]
nproc = [1, 2]
[budget]
warmup_steps = 1
min_steps = 2
max_steps = 2
profile_steps = 0
min_time_s = 0
max_time_s = 1
warmup_min_s = 0
warmup_max_s = 0
"""


def _launch(suite: Path, out: Path, nproc: int = 2) -> subprocess.CompletedProcess[str]:
    """A torchrun launch of `nproc` ranks, without the report (rank 0 drawing it after a
    failure is tests/test_torchrun.py's)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    command = [
        "torchrun", "--standalone", "--nproc-per-node", str(nproc),
        "-m", "gpubench", "sweep", str(suite), "--out", str(out), "--point-timeout", "5",
        "--no-report",
    ]  # fmt: skip
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # three torchrun launches: one of two ranks, two of one
@pytest.mark.skipif(shutil.which("torchrun") is None, reason="needs torchrun on PATH")
def test_torchrun_launch_writes_rows_from_rank_0_and_stops_at_a_failure(tmp_path: Path) -> None:
    suite = tmp_path / "launched.toml"
    suite.write_text(SUITE)
    out = tmp_path / "run"
    done = _launch(suite, out)
    assert done.returncode != 0  # the failed point ended the launch
    rows = read_rows(out)
    # nproc = 1 points are not this launch's; the cnn point comes after the failure
    assert [(r["model"], r["nproc"], r["status"]) for r in rows] == [
        ("mlp", 2, "ok"),
        ("rank_faults:raises", 2, "error"),
    ]
    assert rows[0]["world_size"] == 2 and rows[0]["global_batch_size"] == 8
    assert rows[1]["error"].startswith("rank 1 of 2: ValueError: injected failure on rank 1")
    assert not (out / "report.html").exists()  # --no-report, after a failure too

    # The same folder (issue 49: this launch's, where it had a launch of its own): a launch into
    # it is refused where another machine measured its rows, and while another sweep holds it.
    # Rank 0 refuses it as it opens the folder, before any other rank has a part (the suite's
    # nproc = 1 points make a launch of one rank as much the suite's as one of two).
    before = (out / "results.jsonl").read_bytes()
    saved = (out / "env.json").read_text()
    other = json.loads(saved)
    other["torch"]["version"] = "1.0.0"
    (out / "env.json").write_text(json.dumps(other))
    done = _launch(suite, out, nproc=1)
    assert done.returncode != 0
    assert "measured on another machine" in done.stderr and "torch: '1.0.0' there" in done.stderr
    assert (out / "results.jsonl").read_bytes() == before
    (out / "env.json").write_text(saved)
    with folder.locked(out):  # another sweep in the folder
        done = _launch(suite, out, nproc=1)
    assert done.returncode != 0 and "is in use by another sweep" in done.stderr, done.stderr[-3000:]
    assert (out / "results.jsonl").read_bytes() == before
