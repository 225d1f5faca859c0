"""Does `tune` find the full grid's answer at a fraction of its cost? (issue 24's check)

Runs, one after the other on this machine, the full grid as a sweep (or reuses a finished one:
`--grid DIR`, with its wall time from the grid_wall.json this script wrote there, or
`--grid-seconds S`) and then one `tune` over the same space per budget share (`--budget-share
0.15,0.25,0.40`: a wall-clock budget of that share of the grid's wall time each), and prints,
per share, tune's wall time and tune's pick judged by the grid's own figures
(acceptance.py beside it: its ratio to the grid's best, within the margin; the grid's winner,
inside the grid's tie, or "the grid could not tell" where that tie holds more than 3), with the
load average before each command. `--judge-only` judges the folders a previous run left in DIR
without running anything. Tune's --budget counts from its process's start to the end of its
confirmation, not the report after it (a few seconds).

Folders: DIR/grid-MODEL (unless --grid), DIR/tune-MODEL-at-25pct (one per share),
DIR/tune-vs-grid-MODEL.json (the summary).

Usage: python scripts/tune_vs_grid.py MODEL --out DIR [--grid GRID_DIR [--grid-seconds S]]
           [--budget-share 0.15,0.25,0.40] [--overrun 0.05] [--device cpu]
           [--batch-sizes 4,8,...,1024] [--precisions fp32,bf16] [--threads 1,2]
           [--compile eager,compile] [--channels-last false] [--cuda-graph false]
           [--cudnn-benchmark false] [--optimizer adamw]
           [--size small]
Exit status 0 when, at every share, tune's pick is within the margin of the grid's best by the
grid's figures and tune took no more than its share plus OVERRUN of the grid's time; 2 for bad
input (a --grid that is not a finished sweep of MODEL, say).
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

import grid_runs  # scripts/ is sys.path[0] when run as a script
from acceptance import (
    MARGIN,
    HeadToHead,
    answer,
    head_to_head,
    judge_runs,
    partitions,
)

from gpubench.config.keys import configuration
from gpubench.config.spec import Point
from gpubench.run import confirm
from gpubench.science.partition import heading

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


def rematch(
    grid_dir: Path, tune_dir: Path, margin: float, floor: float | None, budget_s: float
) -> list[str]:
    """Issue 42's acceptance: per partition, tune's pick and the grid's re-measured interleaved
    in fresh worker processes now (run.confirm's rounds, `budget_s` seconds of rounds), judged
    head to head (acceptance.head_to_head), one line each."""
    grid = partitions(grid_dir)
    lines = []
    for key, (rows, record) in partitions(tune_dir).items():
        pick, best = answer(rows, record).best, answer(*grid[key]).best
        if configuration(pick) == configuration(best):
            judged = HeadToHead(0, 1.0, 1.0, 1.0, True, margin, floor)
        else:
            both = [pick, best]
            peaks = [r.get("torch_peak_reserved_bytes") for r in both]
            done = confirm.rounds_in_fresh_workers([Point.of(r) for r in both], budget_s, peaks)
            tune_s, grid_s = confirm.paired_samples(done)
            judged = head_to_head(tune_s, grid_s, margin=margin, floor=floor)
        lines.append(f"{heading(pick)}: head to head: {judged.line()}")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--grid", type=Path, help="a finished sweep of MODEL to judge by (not rerun)")
    p.add_argument("--grid-seconds", type=float, help="--grid's wall time, where not noted")
    p.add_argument("--budget-share", default="0.25", help="comma-separated, e.g. 0.15,0.25,0.40")
    p.add_argument("--overrun", type=float, default=0.05)
    p.add_argument("--device", default="cpu")
    p.add_argument("--size", default="small")
    p.add_argument("--optimizer", default="adamw")
    p.add_argument("--batch-sizes", default=BATCHES)
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--compile", default="eager,compile")
    p.add_argument("--channels-last", default="false")
    p.add_argument("--cuda-graph", default="false", help="CUDA only; fixed like channels-last")
    p.add_argument("--cudnn-benchmark", default="false", help="CUDA only; fixed likewise")
    p.add_argument("--margin", type=float, default=MARGIN)
    p.add_argument("--judge-only", action="store_true")
    p.add_argument(
        "--head-to-head",
        type=float,
        metavar="SECONDS",
        help="also re-measure tune's pick and the grid's interleaved in fresh workers for this "
        "many seconds of rounds, and judge them head to head (issue 42's acceptance)",
    )
    p.add_argument("--floor", type=float, help="the grid-against-grid agreement, to print beside")
    a = p.parse_args()
    try:
        shares = grid_runs.budget_shares(a.budget_share)
        if a.grid is not None:
            grid_runs.check_finished_grid(a.grid, a.model, "speed")
    except ValueError as e:
        p.exit(2, f"{e}\n")
    axes = ["--batch-sizes", a.batch_sizes, "--precisions", a.precisions]
    axes += ["--threads", a.threads, "--compile", a.compile]
    # the grid's channels-last axis is the sweep's default (false): tune's must be the same
    # space, or tune may answer a configuration the grid never measured
    axes += ["--channels-last", a.channels_last]
    if a.device.startswith("cuda"):  # tune's CUDA space holds both values of each by default
        axes += ["--cuda-graph", a.cuda_graph, "--cudnn-benchmark", a.cudnn_benchmark]
    grid_dir = a.grid or a.out / f"grid-{a.model}"
    tunes = {share: grid_runs.tune_dir(a.out, a.model, share) for share in shares}
    if a.judge_only:
        dirs = grid_runs.judged_dirs(a.out, a.model, shares)
        found = [j for d in dirs for j in judge_runs(grid_dir, d, a.margin)]
        print("\n".join(j.line() for j in found))
        if a.head_to_head:
            for d in dirs:
                print("\n".join(rematch(grid_dir, d, a.margin, a.floor, a.head_to_head)))
        return 0 if all(j.within for j in found) else 1
    if a.grid is None:
        load = os.getloadavg()[0]
        grid_s = run_gpubench(
            ["sweep", "--models", a.model, "--size", a.size, "--devices", a.device, "--optimizers",
             a.optimizer, *axes, "--out", str(grid_dir), "--quiet"]
        )  # fmt: skip
        grid_runs.write_grid_seconds(grid_dir, grid_s, load)
    else:
        try:
            grid_s = grid_runs.grid_seconds(a.grid, a.grid_seconds)
        except ValueError as e:
            p.exit(2, f"{e}\n")
    summary = {"model": a.model, "grid": str(grid_dir), "grid_s": round(grid_s, 1), "shares": []}
    ok = True
    for share, tune_dir in tunes.items():
        budget_s = share * grid_s
        tune_s = run_gpubench(
            ["tune", "--model", a.model, "--size", a.size, "--device", a.device, "--optimizer",
             a.optimizer, *axes, "--budget", f"{budget_s:.0f}s", "--out", str(tune_dir), "--quiet"]
        )  # fmt: skip
        found = judge_runs(grid_dir, tune_dir, a.margin)
        took = f"tune took {tune_s:.0f} s ({tune_s / grid_s:.0%} of the grid's {grid_s:.0f} s)"
        print(f"at {share:.0%}: {took}: " + "; ".join(j.line() for j in found), flush=True)
        if a.head_to_head:
            print("\n".join(rematch(grid_dir, tune_dir, a.margin, a.floor, a.head_to_head)))
        within = all(j.within for j in found) and tune_s <= (share + a.overrun) * grid_s
        ok = ok and within
        summary["shares"].append(
            {
                "share": share,
                "tune": str(tune_dir),
                "tune_budget_s": round(budget_s, 1),
                "tune_s": round(tune_s, 1),
                "judged": [j.to_dict() for j in found],
                "pass": within,
                "load_after": round(os.getloadavg()[0], 2),
            }
        )
    path = a.out / f"tune-vs-grid-{a.model}.json"
    summary = grid_runs.merged_summary(path, summary)  # a later run's shares beside earlier ones
    print(json.dumps(summary))
    path.write_text(json.dumps(summary, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
