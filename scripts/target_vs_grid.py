"""Does `tune --target` find the grid's fastest time to target at a fraction of its cost? (issue 24)

Runs, one after the other on this machine, the grid as a convergence sweep (batch sizes x the
lr-scaling rules x SEEDS seeds, the shipped convergence suite's settings, stopping at the target)
and then `tune --target` over the same batch sizes with a wall-clock budget of BUDGET_SHARE x
the grid's wall time, and prints both wall times, the grid's fastest configuration (its median
time to target over the seeds) and tune's pick judged by the GRID's median for it
(gpubench.tune.acceptance_target; tune's own median, biased low by its selection, shown beside),
with the load. `--judge-only` judges the folders a previous run left in DIR.

Usage: python scripts/target_vs_grid.py MODEL METRIC=VALUE --out DIR [--batch-sizes 8,...,512]
           [--seeds 3] [--budget-share 0.35] [--share 0.4] [--tolerance 0.2]
Exit status 0 when the grid's time to target for tune's pick is within TOLERANCE of the grid's
best and tune took no more than SHARE of the grid's time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tune_vs_grid import run_gpubench  # scripts/ is sys.path[0] when run as a script

from gpubench.config.suite import load_suite
from gpubench.tune.acceptance_target import TOLERANCE, judge_target_runs

SUITE = """name = "target-grid"
mode = "convergence"
models = [{model!r}]
size = {size!r}
devices = ["cpu"]
batch_sizes = {batches}
precisions = ["fp32"]
optimizers = ["adamw"]
seeds = {seeds}

[convergence]
image_size = {image_size}
target_metric = {metric!r}
target = {target}
stop_at_target = true
max_time_s = {max_time}
eval_every_steps = {eval_every}
eval_rel_gap = {eval_gap}
lr = {lr}
lr_scaling = ["sqrt", "none", "linear"]
base_batch_size = {base}
warmup_samples = {warmup}
noise_every_steps = {noise_every}
noise_samples = {noise_samples}
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("target")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--batch-sizes", default="8,16,32,64,128,256,512")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--budget-share", type=float, default=0.35)
    p.add_argument("--share", type=float, default=0.4)
    p.add_argument("--tolerance", type=float, default=TOLERANCE)
    p.add_argument("--judge-only", action="store_true")
    a = p.parse_args()
    metric, value = a.target.split("=")
    shipped = load_suite("convergence")
    c = shipped.convergence
    grid_dir, tune_dir = a.out / f"grid-target-{a.model}", a.out / f"tune-target-{a.model}"
    if a.judge_only:
        judged = judge_target_runs(grid_dir, tune_dir, a.tolerance)
        print(judged.line())
        return 0 if judged.within else 1
    if grid_dir.exists() or tune_dir.exists():  # before the suite file is written over
        sys.exit(f"{a.out} already holds a comparison for {a.model}; choose another --out")
    a.out.mkdir(parents=True, exist_ok=True)
    suite = a.out / f"grid-target-{a.model}.toml"
    batches = [int(b) for b in a.batch_sizes.split(",")]
    suite.write_text(
        SUITE.format(
            model=a.model,
            size=shipped.size,
            batches=batches,
            seeds=list(range(a.seeds)),
            image_size=c.image_size,
            metric=metric,
            target=float(value),
            max_time=c.max_time_s,
            eval_every=c.eval_every_steps,
            eval_gap=c.eval_rel_gap,
            lr=c.lr,
            base=c.base_batch_size,
            warmup=c.warmup_samples,
            noise_every=c.noise_every_steps,
            noise_samples=c.noise_samples,
        )
    )
    grid_s = run_gpubench(["sweep", str(suite), "--out", str(grid_dir), "--quiet"])
    budget_s = a.budget_share * grid_s
    tune_s = run_gpubench(
        ["tune", "--model", a.model, "--device", "cpu", "--target", a.target, "--batch-sizes",
         a.batch_sizes, "--seeds", str(a.seeds), "--budget", f"{budget_s:.0f}s", "--out",
         str(tune_dir), "--quiet"]
    )  # fmt: skip
    judged = judge_target_runs(grid_dir, tune_dir, a.tolerance)
    print(judged.line())
    summary = {
        "model": a.model,
        "target": a.target,
        "grid_s": round(grid_s, 1),
        "tune_s": round(tune_s, 1),
        "tune_share": round(tune_s / grid_s, 3),
        "judged": judged.to_dict(),
        "load_after": round(os.getloadavg()[0], 2),
    }
    ok = judged.within and tune_s <= a.share * grid_s
    summary["pass"] = ok
    print(json.dumps(summary, indent=1, default=str))
    (a.out / f"target-vs-grid-{a.model}.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
