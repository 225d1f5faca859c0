"""A reused worker compiles every point afresh: torch._dynamo keeps guards for each model it
compiled, and past its recompile limit (8 per code object) a later "compile" point would run
eager without a word (issue 24's grid: 36 compiled cnn points in one worker)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_every_compiled_point_in_one_worker_is_compiled_afresh(tmp_path: Path) -> None:
    # the workload lowers the limit to 1 compilation per forward in its worker: the second
    # point's own compilation would hit it, as the ninth of the cnn grid hit torch's 8 (two
    # points, not three: the second is the first past the limit, and each compiles for seconds)
    paths = [str(ROOT), str(ROOT / "tests"), *sys.path]
    env = os.environ | {"PYTHONPATH": os.pathsep.join(paths)}
    sizes = "2,4"
    done = subprocess.run(
        [sys.executable, "-m", "gpubench", "sweep", "--models", "compile_workloads:limited",
         "--devices", "cpu", "--precisions", "fp32", "--optimizers", "sgd", "--compile",
         "compile", "--batch-sizes", sizes, "--steps", "1", "--no-profile", "--no-confirm",
         "--quiet", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "recompile_limit" not in done.stderr and "cache_size_limit" not in done.stderr
