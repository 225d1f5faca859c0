"""The sweep's start-up: the command line starts the workers' fork server before its own heavy
imports (torch, pandas), and the models' build check runs in the worker, so the sweep's parent
never imports torch._dynamo (which building on the meta device imports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Runs in a fresh interpreter: whether torch was loaded when the fork server was started, what
# `sweep` with a bad option of its second model exits with (the transformer, built first on the
# meta device, imports torch._dynamo wherever it is built), and whether the parent imported
# torch._dynamo.
SCRIPT = """
import json
import sys
from gpubench.run import forkserver

started_with = []
real_start = forkserver.start

def start():
    started_with.append("torch" in sys.modules)
    real_start()

forkserver.start = start
from gpubench.cli import main

code = main(["sweep", "--models", "transformer,mlp", "--batch-sizes", "4",
             "--option", "mlp.bogus=1", "--out", sys.argv[1]])
print(json.dumps([started_with, code, "torch._dynamo" in sys.modules]))
"""


@pytest.mark.slow  # a sweep in a fresh interpreter
def test_the_fork_server_starts_before_torch_and_the_build_check_runs_in_the_worker(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    started_with, code, dynamo = json.loads(done.stdout.splitlines()[-1])
    # started by the command line before torch was imported (and again, a no-op, by run_sweep)
    assert started_with[0] is False, done.stdout
    assert code == 2 and dynamo is False, done.stdout
    assert "model 'mlp' has no option 'bogus'" in done.stderr
    assert not (tmp_path / "run").exists()
