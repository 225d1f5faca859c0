"""Helpers shared by the isolation, resume and max-batch tests (not a test module)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from gpubench.run.memory_cap import exact_size

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


def memory_cap(headroom_mib: int = 320) -> int:
    """A --max-memory (bytes) of `headroom_mib` MiB: on the CPU the cap counts what a point maps
    beyond what its worker holds, so with 320, tens of `fault_workloads:hungry` samples fit
    under it and a thousand never do, with a CPU build of torch as with a CUDA one."""
    return headroom_mib * 2**20


def cap_text() -> str:
    return exact_size(memory_cap())


def rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def subprocess_env() -> dict[str, str]:
    """The environment of a `python -m gpubench` subprocess run from the repository root."""
    paths = [str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def gpubench_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpubench", *args]
