"""A run records the checkout's commit wherever it is started from: env.json's git_commit and
the pytest-benchmark machine info's gpubench_commit come from the folder gpubench's code is
in, not the current folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = (
    "import json\n"
    "from gpubench.store import env\n"
    "from gpubench.cli.pytest_plugin import machine_summary\n"
    "print(json.dumps([env.git_commit(), machine_summary()['gpubench_commit']]))\n"
)


def test_the_commit_is_recorded_from_any_folder(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=tmp_path,  # no .git here or above
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    commits = json.loads(done.stdout.splitlines()[-1])
    assert [c.removesuffix("-dirty") for c in commits] == [head, head]
