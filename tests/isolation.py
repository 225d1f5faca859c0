"""Helpers shared by the isolation, resume and max-batch tests (not a test module)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from gpubench.config.spec import Budget, Point
from gpubench.run.memory_cap import exact_size
from gpubench.run.worker import WorkerRunner

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
_baseline: list[int] = []


def memory_cap(headroom_mib: int = 320) -> int:
    """A --max-memory (bytes) `headroom_mib` MiB above what a worker holds once ready on this
    machine: with 320, tens of `fault_workloads:hungry` samples fit under it and a thousand
    never do. (A fixed size would not do: a CUDA build of torch maps far more address space
    than a CPU build.)"""
    if not _baseline:
        runner = WorkerRunner()
        try:
            runner.run(Point("mlp", "tiny", "cpu", "fp32", "sgd", 2), Budget.fixed(1, 1))
            assert runner.worker_address_space is not None, "needs /proc (Linux)"
            _baseline.append(runner.worker_address_space)
        finally:
            runner.close()
    return (_baseline[0] // 2**20 + headroom_mib) * 2**20


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
