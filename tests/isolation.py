"""Helpers shared by the isolation, resume and max-batch tests (not a test module)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from gpubench.run.memory_cap import exact_size

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


# A tiny sweep run to its end: the MLP at batches 4 and 8, fp32, SGD, one step each, confirmed
# (conftest's session-wide `finished_sweep`, which tests that resume or read a folder copy).
FINISHED_SWEEP = [
    "sweep", "quick", "--models", "mlp", "--size", "tiny", "--devices", "cpu",
    "--batch-sizes", "4,8", "--precisions", "fp32", "--optimizers", "sgd", "--steps", "1",
    "--quiet",
]  # fmt: skip


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


def interruptible() -> None:
    """A child's SIGINT at its default (a subprocess' preexec_fn): where pytest itself was
    started with SIGINT ignored (a job started with `&` from a shell without job control), its
    children inherit SIG_IGN, Python then installs no KeyboardInterrupt handler, and a test
    that sends them Ctrl-C would see them carry on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def gpubench_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpubench", *args]


def allocations(sizes: list[int]) -> list[bool]:
    """Whether a tensor of each size (bytes) could be allocated, in turn, each freed before the
    next (a worker's Call target, under its memory cap)."""
    import torch

    from gpubench.harness.failure import is_out_of_memory

    out = []
    for size in sizes:
        try:
            torch.empty(size, dtype=torch.uint8)
        except RuntimeError as e:
            assert is_out_of_memory(e), e
            out.append(False)
        else:
            out.append(True)
    return out
