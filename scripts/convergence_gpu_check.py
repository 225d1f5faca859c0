"""GPU check of convergence runs: a reduced convergence_gpu suite (about 5 minutes on one GPU).

Run on a CUDA machine from the repository root:
    PYTHONPATH=. python scripts/convergence_gpu_check.py
It writes the run folder under $OUT (or results/) and prints, last, the per-point table and the
batch-size analysis (S_min, B_crit, B_simple, recommended / throughput-optimal batch sizes).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import torch

from gpubench.cli.convergence_table import batch_table, comparisons, points_table
from gpubench.config.suite import load_suite
from gpubench.run.sweep import run_sweep


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device here; this check needs one", file=sys.stderr)
        return 1
    spec = load_suite(Path(__file__).parents[1] / "suites" / "convergence_gpu.toml")
    conv = dataclasses.replace(spec.convergence, max_time_s=20.0)
    spec = dataclasses.replace(
        spec,
        models=("mlp", "cnn", "transformer"),
        batch_sizes=(16, 64, 256, 1024),
        precisions=("bf16",),
        optimizers=("adamw",),
        seeds=(0,),
        convergence=conv,
    )
    out = Path(os.environ.get("OUT", "results")) / "convergence_gpu_check"
    started = time.perf_counter()
    frame = run_sweep(spec, out)
    wall = time.perf_counter() - started
    from rich.console import Console

    console = Console(width=200)
    groups = json.loads((out / "batch_analysis.json").read_text())["groups"]
    console.print(points_table(frame))
    console.print(batch_table(groups))
    for line in comparisons(groups):
        console.print(line, highlight=False)
    console.print(f"{len(frame)} points in {wall:.0f} s on {torch.cuda.get_device_name()}; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
