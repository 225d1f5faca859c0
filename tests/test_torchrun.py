"""torchrun launches (--standalone, two gloo ranks on this machine) name the rank that ended a
point: a rank killed by a signal is the one the row blames (its survivor only saw a closed
connection). A launch's folder guards (another machine's folder, a folder in use) are checked on
tests/test_launched.py's folder."""

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
models = ["{model}"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [4]
optimizers = ["sgd"]
parallel = ["ddp"]
nproc = [2]
[budget]
warmup_steps = 1
min_steps = 2
max_steps = 2
min_time_s = 0
max_time_s = 1
"""

pytestmark = pytest.mark.skipif(shutil.which("torchrun") is None, reason="needs torchrun")


def _launch(tmp_path: Path, model: str, out: Path) -> subprocess.CompletedProcess[str]:
    suite = tmp_path / "launched.toml"
    suite.write_text(SUITE.format(model=model))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    command = [
        "torchrun", "--standalone", "--nproc-per-node", "2",
        "-m", "gpubench", "sweep", str(suite), "--out", str(out), "--point-timeout", "60",
    ]  # fmt: skip
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def test_a_killed_rank_is_named_not_its_survivor(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _launch(tmp_path, "rank_faults:killed", out)
    assert done.returncode != 0
    (row,) = read_rows(out)
    assert row["status"] == "error", row["error"]
    assert row["error"].startswith("rank 1 of 2 died without an error of its own"), row["error"]
    assert "then rank 0 of 2: " in row["error"]  # the survivor's lost peer, after the cause
    # rank 0 rendered the report before torchrun stopped it (the other rank's exit stops it)
    assert (out / "report.html").is_file(), done.stderr[-2000:]
