"""A sweep launched by torchrun (here --standalone, two gloo ranks on this machine): rank 0
alone writes the rows, and a rank that fails ends the launch with a row naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

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
min_time_s = 0
max_time_s = 1
"""


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="needs torchrun on PATH")
def test_torchrun_launch_writes_rows_from_rank_0_and_stops_at_a_failure(tmp_path: Path) -> None:
    suite = tmp_path / "launched.toml"
    suite.write_text(SUITE)
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    command = [
        "torchrun", "--standalone", "--nproc-per-node", "2",
        "-m", "gpubench", "sweep", str(suite), "--out", str(out), "--point-timeout", "5",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0  # the failed point ended the launch
    rows = read_rows(out)
    # nproc = 1 points are not this launch's; the cnn point comes after the failure
    assert [(r["model"], r["nproc"], r["status"]) for r in rows] == [
        ("mlp", 2, "ok"),
        ("rank_faults:raises", 2, "error"),
    ]
    assert rows[0]["world_size"] == 2 and rows[0]["global_batch_size"] == 8
    assert rows[1]["error"].startswith("rank 1 of 2: ValueError: injected failure on rank 1")
