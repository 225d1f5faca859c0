"""Does `tune` find the full grid's answer at a fraction of its cost? (issue 24's check)

Runs, one after the other on this machine, the full grid as a sweep and then `tune` over the same
space with a wall-clock budget of BUDGET_SHARE x the grid's wall time, and prints both wall times
(each command's whole run: start, search or sweep, report), both answers (`explain --json`) and
tune's pick judged by the grid's own figures (gpubench.tune.acceptance: its ratio to the grid's
best, within 3%; the grid's winner, inside the grid's tie, or "the grid could not tell" where that
tie holds more than 3), with the load average before and after each. `--judge-only` judges the
folders a previous run left in DIR without running anything. Tune's --budget counts from its
process's start to the end of its confirmation, not the report after it (a few seconds), so the
budget is set under the share it is held to (SHARE).

Usage: python scripts/tune_vs_grid.py MODEL --out DIR [--share 0.3] [--budget-share 0.25]
           [--device cpu]
           [--batch-sizes 4,8,...,1024] [--precisions fp32,bf16] [--threads 1,2]
           [--compile eager,compile] [--channels-last false] [--optimizer adamw]
           [--size small]
Exit status 0 when tune's pick is within the margin of the grid's best by the grid's figures, and
tune took no more than SHARE of the grid's time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpubench.tune.acceptance import MARGIN, judge_runs

BATCHES = ",".join(str(2**k) for k in range(2, 11))  # 4 ... 1024


def run_gpubench(argv: list[str]) -> float:
    """Wall seconds of one gpubench command (its output shown); raises where it fails. Each
    command compiles into a fresh torch.compile cache (TORCHINDUCTOR_CACHE_DIR), as a user's
    first run does: a command run after another must not reuse the kernels it compiled."""
    load = os.getloadavg()[0]
    print(f"$ {' '.join(argv)}   (load average {load:.2f})", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpubench-inductor-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gpubench", *argv], check=True, env=env)
        return time.perf_counter() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--share", type=float, default=0.3)
    p.add_argument("--budget-share", type=float, default=0.25)
    p.add_argument("--device", default="cpu")
    p.add_argument("--size", default="small")
    p.add_argument("--optimizer", default="adamw")
    p.add_argument("--batch-sizes", default=BATCHES)
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--compile", default="eager,compile")
    p.add_argument("--channels-last", default="false")
    p.add_argument("--margin", type=float, default=MARGIN)
    p.add_argument("--judge-only", action="store_true")
    a = p.parse_args()
    axes = ["--batch-sizes", a.batch_sizes, "--precisions", a.precisions]
    axes += ["--threads", a.threads, "--compile", a.compile]
    # the grid's channels-last axis is the sweep's default (false): tune's must be the same
    # space, or tune may answer a configuration the grid never measured
    axes += ["--channels-last", a.channels_last]
    grid_dir, tune_dir = a.out / f"grid-{a.model}", a.out / f"tune-{a.model}"
    if a.judge_only:
        found = judge_runs(grid_dir, tune_dir, a.margin)
        print("\n".join(j.line() for j in found))
        return 0 if all(j.within for j in found) else 1
    grid_s = run_gpubench(
        ["sweep", "--models", a.model, "--size", a.size, "--devices", a.device, "--optimizers",
         a.optimizer, *axes, "--out", str(grid_dir), "--quiet"]
    )  # fmt: skip
    budget_s = a.budget_share * grid_s
    tune_s = run_gpubench(
        ["tune", "--model", a.model, "--size", a.size, "--device", a.device, "--optimizer",
         a.optimizer, *axes, "--budget", f"{budget_s:.0f}s", "--out", str(tune_dir), "--quiet"]
    )  # fmt: skip
    found = judge_runs(grid_dir, tune_dir, a.margin)
    print("\n".join(j.line() for j in found))
    summary = {
        "model": a.model,
        "grid_s": round(grid_s, 1),
        "tune_s": round(tune_s, 1),
        "tune_share": round(tune_s / grid_s, 3),
        "tune_budget_s": round(budget_s, 1),
        "judged": [j.to_dict() for j in found],
        "within": all(j.within for j in found),
        "load_after": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(summary))
    (a.out / f"tune-vs-grid-{a.model}.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0 if summary["within"] and tune_s <= a.share * grid_s else 1


if __name__ == "__main__":
    sys.exit(main())
