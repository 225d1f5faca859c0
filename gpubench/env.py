"""Capture of the machine and software a run measured on (env.json)."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import torch


def capture() -> dict[str, Any]:
    """What makes a run's numbers reproducible: versions, hardware and the math switches."""
    return {
        "captured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "gpubench": {"version": _version(), "git_commit": git_commit()},
        "python": sys.version.split()[0],
        "os": platform.platform(),
        "hostname": platform.node(),
        "cpu": cpu_info(),
        "torch": torch_info(),
        "gpus": gpu_info(),
    }


def _version() -> str:
    try:
        return metadata.version("gpubench")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def git_commit() -> str | None:
    """The checkout's commit (with '-dirty' when it has uncommitted changes), or None."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "-uno"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("-dirty" if dirty.strip() else "")


def cpu_info() -> dict[str, Any]:
    model = platform.processor() or None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "model": model,
        "machine": platform.machine(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
    }


def torch_info() -> dict[str, Any]:
    cudnn = torch.backends.cudnn
    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": cudnn.version() if cudnn.is_available() else None,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_allow_tf32": cudnn.allow_tf32,
        "cudnn_benchmark": cudnn.benchmark,
        "cudnn_deterministic": cudnn.deterministic,
    }


def gpu_info() -> list[dict[str, Any]]:
    if not torch.cuda.is_available():
        return []
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append(
            {
                "index": i,
                "name": p.name,
                "memory_bytes": p.total_memory,
                "compute_capability": f"{p.major}.{p.minor}",
                "multiprocessors": p.multi_processor_count,
            }
        )
    return out
