"""Does the noise phase's B_noise predict the batch a convergence grid trains fastest to its
target? (issue 51, done-when 2)

Reads a finished convergence sweep (the grid: its rows' steps and seconds to the target per
batch and seed, and their samples/s), runs the noise phase (science.noise_phase.measure) on each
of its models under the shipped convergence suite's settings, the grid's own (the CNN on 8x8
digits), with one intra-op thread as a sweep's phase does, once per `--seeds` seed, and prints
per model and seed the predicted pick (science.goodput over the grid's median samples/s per
batch, the prediction's only input from the grid) beside the grid's median time to target
for it, the grid's best batch, the throughput-fastest batch's gap, and the phase's cost against
the grid's time for that model (its points' wall time, phases.json). `--json FILE` writes the
same figures.

Usage: python scripts/target_grid.py GRID_DIR [--seeds 0,1,2] [--batch 64] [--json FILE]
Exit status 0 when every prediction's grid time is within TOLERANCE (15%) of the grid's best
and every phase cost at most 10% of its model's grid time; 1 otherwise; 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from gpubench.config.suite import convergence_settings
from gpubench.harness.threads import intra_op_threads
from gpubench.science import goodput, noise_phase
from gpubench.science.fastest_to_target import samples_per_s_by_batch
from gpubench.store import phases_record
from gpubench.store.noise_record import NoiseEntry
from gpubench.store.results import read_rows

TOLERANCE = 0.15
MAX_COST = 0.10
PHASE_LIMIT_S = 120.0  # a run to the target: far more than the grid's B=64 points take


def grid_times(rows: list[dict[str, Any]]) -> dict[int, float]:
    """Each batch's median seconds to target, over the seeds, where every seed reached it."""
    by: dict[int, list[float | None]] = defaultdict(list)
    for r in rows:
        by[int(r["batch_size"])].append(r.get("time_to_target_s"))
    return {
        b: statistics.median(t for t in ts if t is not None)
        for b, ts in sorted(by.items())
        if all(t is not None for t in ts)
    }


def grid_seconds(run_dir: Path, model: str) -> float:
    """The wall time of `model`'s points in the grid (phases.json)."""
    record = phases_record.read(run_dir)
    if record is None:
        raise SystemExit(f"{run_dir}: no phases.json; a finished convergence sweep has one")
    return sum(p.end - p.start for p in record.points if p.point.split()[0] == model)


def judge(model: str, rows: list[dict[str, Any]], entry: NoiseEntry) -> dict[str, Any]:
    """The prediction from `entry` over `rows`' samples/s, judged by `rows`' times."""
    rates = samples_per_s_by_batch(rows)
    high = float("inf") if entry.high is None and entry.low is not None else entry.high
    pick = goodput.pick(rates, entry.b_noise, entry.low, high)
    times = grid_times(rows)
    best = min(times, key=lambda b: times[b])
    return {
        "model": model,
        "seed": None,
        "b_noise": entry.b_noise,
        "low": entry.low,
        "high": entry.high,
        "kind": entry.kind,
        "reached": entry.reached,
        "phase_steps": entry.last_step,
        "phase_s": entry.cost_s,
        "predicted": pick.batch,
        "holds": pick.holds,
        "predicted_s": times.get(pick.batch),
        "best": best,
        "best_s": times[best],
        "throughput_batch": pick.throughput_batch,
        "throughput_s": times.get(pick.throughput_batch),
        "times_s": times,
        "samples_per_s": rates,
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("grid", type=Path)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--batch", type=int, default=noise_phase.BATCH)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        print(f"--seeds {args.seeds!r}: allowed: seeds such as 0,1,2", file=sys.stderr)
        return 2
    rows = [r for r in read_rows(args.grid) if r.get("status") == "ok"]
    if not rows or any(r.get("mode") not in (None, "convergence") for r in rows):
        print(f"{args.grid}: no convergence rows; allowed: a convergence sweep", file=sys.stderr)
        return 2
    out: list[dict[str, Any]] = []
    ok = True
    for model in sorted({str(r["model"]) for r in rows}):
        mine = [r for r in rows if r["model"] == model]
        size, optimizer = str(mine[0]["model_size"]), str(mine[0]["optimizer"])
        _, conv = convergence_settings(optimizer)
        grid_s = grid_seconds(args.grid, model)
        for seed in seeds:
            t0 = time.perf_counter()
            with intra_op_threads(1):
                entry = noise_phase.measure(
                    model, size, optimizer, "cpu", PHASE_LIMIT_S, args.batch, seed, conv
                )
            if not isinstance(entry, NoiseEntry):
                print(entry.line(), file=sys.stderr)
                ok = False
                continue
            got = judge(model, mine, entry)
            got |= {"seed": seed, "grid_s": grid_s, "wall_s": time.perf_counter() - t0}
            out.append(got)
            ratio = (got["predicted_s"] or float("inf")) / got["best_s"]
            cost = got["phase_s"] / grid_s
            ok &= ratio <= 1 + TOLERANCE and cost <= MAX_COST
            top = got["throughput_s"]
            gap = f"x{top / got['best_s']:.2f}" if top else "did not reach it in every seed"
            print(
                f"{model} seed {seed}: B_noise {entry.b_noise:.0f} "
                f"({entry.low or 0:.0f}-{entry.high or float('inf'):.0f}, {entry.kind}, "
                f"{entry.last_step} updates, reached {entry.reached}) -> predicted "
                f"B={got['predicted']} ({got['predicted_s']:.2f} s in the grid, "
                f"x{ratio:.2f} the best B={got['best']} at {got['best_s']:.2f} s); "
                f"throughput-fastest B={got['throughput_batch']}: {gap}; phase "
                f"{got['phase_s']:.1f} s = {cost:.1%} of the grid's {grid_s:.0f} s",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
