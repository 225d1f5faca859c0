"""Does `tune --target` find the grid's fastest time to target at a fraction of its cost? (issue 24)

Runs, one after the other on this machine, the grid as a convergence sweep (batch sizes x the
lr-scaling rules x SEEDS seeds, the shipped convergence suite's settings, stopping at the target)
or reuses a finished one (`--grid DIR`: its batch sizes and seeds, its wall time from the
grid_wall.json this script wrote there or `--grid-seconds S`), then one `tune --target` over the
same batch sizes per budget share (`--budget-share 0.15,0.25,0.40` of the grid's wall time), and
prints per share tune's wall time and tune's pick judged by the GRID's median for it
(acceptance_target.py beside it; tune's own median, biased low by its selection, shown beside),
with the load. `--judge-only` judges the folders a previous run left in DIR.

Folders: DIR/grid-target-MODEL (unless --grid) with its suite DIR/grid-target-MODEL.toml,
DIR/tune-target-MODEL-at-35pct (one per share), DIR/target-vs-grid-MODEL.json (the summary).

Usage: python scripts/target_vs_grid.py MODEL METRIC=VALUE --out DIR
           [--grid GRID_DIR [--grid-seconds S]] [--batch-sizes 8,...,512] [--seeds 3]
           [--budget-share 0.35] [--overrun 0.05] [--tolerance 0.2]
Exit status 0 when, at every share, the grid's time to target for tune's pick is within
TOLERANCE of the grid's best and tune took no more than its share plus OVERRUN of the grid's
time; 2 for bad input (a --grid that is not a finished convergence sweep of MODEL, say).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import grid_runs  # scripts/ is sys.path[0] when run as a script
from acceptance_target import TOLERANCE, judge_target_runs
from tune_vs_grid import run_gpubench

from gpubench.config.suite import load_suite
from gpubench.store.results import read_rows
from gpubench.tune.target import parse_target

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
    p.add_argument("--grid", type=Path, help="a finished convergence sweep of MODEL (not rerun)")
    p.add_argument("--grid-seconds", type=float, help="--grid's wall time, where not noted")
    p.add_argument("--batch-sizes", default="8,16,32,64,128,256,512")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--budget-share", default="0.35", help="comma-separated, e.g. 0.15,0.25,0.40")
    p.add_argument("--overrun", type=float, default=0.05)
    p.add_argument("--tolerance", type=float, default=TOLERANCE)
    p.add_argument("--judge-only", action="store_true")
    a = p.parse_args()
    try:
        shares = grid_runs.budget_shares(a.budget_share)
        if a.grid is not None:
            grid_runs.check_finished_grid(a.grid, a.model, "convergence")
            batches, seeds = _grid_space(a.grid, a.target)
        else:
            batches, seeds = [int(b) for b in a.batch_sizes.split(",")], a.seeds
    except ValueError as e:
        p.exit(2, f"{e}\n")
    grid_dir = a.grid or a.out / f"grid-target-{a.model}"
    tunes = {share: grid_runs.tune_dir(a.out, a.model, share, target=True) for share in shares}
    if a.judge_only:
        dirs = grid_runs.judged_dirs(a.out, a.model, shares, target=True)
        judged = [judge_target_runs(grid_dir, d, a.tolerance) for d in dirs]
        print("\n".join(j.line() for j in judged))
        return 0 if all(j.within for j in judged) else 1
    if a.grid is None:
        if grid_dir.exists():  # before the suite file is written over
            sys.exit(f"{a.out} already holds a grid for {a.model}; choose another --out")
        load = os.getloadavg()[0]
        grid_s = run_gpubench(["sweep", str(_suite(a, batches)), "--out", str(grid_dir), "--quiet"])
        grid_runs.write_grid_seconds(grid_dir, grid_s, load)
    else:
        try:
            grid_s = grid_runs.grid_seconds(a.grid, a.grid_seconds)
        except ValueError as e:
            p.exit(2, f"{e}\n")
    summary = {"model": a.model, "target": a.target, "grid": str(grid_dir), "shares": []}
    summary["grid_s"] = round(grid_s, 1)
    ok = True
    for share, tune_dir in tunes.items():
        tune_s = run_gpubench(
            ["tune", "--model", a.model, "--device", "cpu", "--target", a.target, "--batch-sizes",
             ",".join(map(str, batches)), "--seeds", str(seeds), "--budget",
             f"{share * grid_s:.0f}s", "--out", str(tune_dir), "--quiet"]
        )  # fmt: skip
        judged = judge_target_runs(grid_dir, tune_dir, a.tolerance)
        took = f"tune took {tune_s:.0f} s ({tune_s / grid_s:.0%} of the grid's {grid_s:.0f} s)"
        print(f"at {share:.0%}: {took}: {judged.line()}", flush=True)
        within = judged.within and tune_s <= (share + a.overrun) * grid_s
        ok = ok and within
        summary["shares"].append(
            {
                "share": share,
                "tune": str(tune_dir),
                "tune_s": round(tune_s, 1),
                "judged": judged.to_dict(),
                "pass": within,
                "load_after": round(os.getloadavg()[0], 2),
            }
        )
    print(json.dumps(summary, indent=1, default=str))
    path = a.out / f"target-vs-grid-{a.model}.json"
    path.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return 0 if ok else 1


def _grid_space(grid: Path, target: str) -> tuple[list[int], int]:
    """The batch sizes and the seed count of a reused grid, whose rows must aim at `target`
    (ValueError otherwise): tune searches the space the grid measured."""
    metric, value = parse_target(target)
    rows = read_rows(grid)
    aimed = {(r.get("target_metric"), r.get("target")) for r in rows}
    if aimed != {(metric, value)}:
        raise ValueError(f"--grid {grid} was run to {sorted(aimed, key=str)}, not {target}")
    return sorted({int(r["batch_size"]) for r in rows}), len({r["seed"] for r in rows})


def _suite(a: argparse.Namespace, batches: list[int]) -> Path:
    """Write the grid's suite (the shipped convergence suite's settings, aimed at the target)."""
    metric, value = parse_target(a.target)
    c = load_suite("convergence").convergence
    a.out.mkdir(parents=True, exist_ok=True)
    suite = a.out / f"grid-target-{a.model}.toml"
    suite.write_text(
        SUITE.format(
            model=a.model,
            size=load_suite("convergence").size,
            batches=batches,
            seeds=list(range(a.seeds)),
            image_size=c.image_size,
            metric=metric,
            target=value,
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
    return suite


if __name__ == "__main__":
    sys.exit(main())
