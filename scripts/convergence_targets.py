"""Choose convergence targets that rank batch sizes (issue 51): train points of a convergence
suite past any target, keep each learning curve, and tabulate the steps and training seconds
each candidate target takes per batch size and seed.

    python scripts/convergence_targets.py train OUT.jsonl --models cnn --max-steps 3000
    python scripts/convergence_targets.py table OUT.jsonl --target cnn:eval_accuracy:0.98

`train` runs the suite's points (default `suites/convergence.toml`; `--models`, `--batch-sizes`,
`--seeds`, `--image-size`, `--lr` override it) one after another in this process, with the
suite's learning-rate rule, warm-up, evaluation gaps and noise measurement, but without stopping
at the target: each point trains until `--max-steps` or `--max-time` (training seconds), and
its row (curve included) is appended to OUT.jsonl. `table` reads such files and prints, per
candidate target, a Markdown table of steps (and seconds) to target by batch size and seed, the
median over seeds, and the batch with the least median time among those where every seed
reached the target. Steps are those of the first evaluation that met the target, as the suite
records them (known to within its evaluation gap).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from gpubench.config.suite import load_suite
from gpubench.science.convergence import train_point
from gpubench.science.curve import first_reaching

SUITE = Path(__file__).parents[1] / "suites" / "convergence.toml"


def train(args: argparse.Namespace) -> None:
    """Train every selected point of the suite and append its row to `args.out`."""
    if args.threads:
        # fewer threads than cores where another process loads the machine: steps to target
        # do not depend on it, and a contended thread pool can slow a step tenfold
        torch.set_num_threads(args.threads)
    spec = load_suite(Path(args.suite))
    conv = dataclasses.replace(
        spec.convergence,
        stop_at_target=False,
        max_time_s=args.max_time,
        max_steps=args.max_steps,
        **({"image_size": args.image_size} if args.image_size else {}),
        **({"lr": args.lr} if args.lr else {}),
    )
    points = [
        p
        for p in spec.points()
        if (not args.models or p.model in args.models.split(","))
        and (not args.batch_sizes or p.batch_size in _ints(args.batch_sizes))
    ]
    if args.seeds:  # the seeds asked for, whichever the suite holds
        points = [
            dataclasses.replace(p, seed=s)
            for p in {dataclasses.replace(p, seed=0): None for p in points}
            for s in _ints(args.seeds)
        ]
    with open(args.out, "a") as f:
        for point in points:
            t0 = time.perf_counter()
            row = train_point(point, conv)
            row["image_size"] = conv.image_size
            row["lr_base"] = conv.lr
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(
                f"{point.model} B={point.batch_size} seed {point.seed}: {row['curve'][-1]['step']}"
                f" steps, {row['wall_time_s']:.1f} s training, {time.perf_counter() - t0:.1f} s"
                f" in all; last eval loss {row['eval_loss']:.4f}, accuracy "
                f"{row['eval_accuracy']:.4f}",
                flush=True,
            )


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def table(args: argparse.Namespace) -> None:
    """Print a Markdown table per target `MODEL:METRIC:VALUE` of `args.target`."""
    rows = [
        json.loads(line)
        for path in args.files
        for line in Path(path).read_text().splitlines()
        if line.strip()
    ]
    for text in args.target:
        model, metric, value = text.split(":")
        print(_table([r for r in rows if r["model"] == model], model, metric, float(value)))


def _table(rows: list[dict[str, Any]], model: str, metric: str, target: float) -> str:
    """Steps and seconds to `target` of `metric` by batch size and seed; "-" where a run did
    not reach it (with its last step)."""
    cells: dict[int, dict[int, tuple[int, float] | None]] = defaultdict(dict)
    for r in rows:
        hit = first_reaching(r["curve"], metric, target)
        cells[r["batch_size"]][r["seed"]] = hit and (hit["step"], hit["time_s"])
    seeds = sorted({s for c in cells.values() for s in c})
    out = [
        f"\n{model}, {metric} {'>=' if metric == 'eval_accuracy' else '<='} {target}\n",
        "| B | " + " | ".join(f"seed {s}: steps (s)" for s in seeds) + " | median steps | "
        "median s |",
        "|---" * (len(seeds) + 3) + "|",
    ]
    best: tuple[float, int] | None = None
    for b in sorted(cells):
        got = [cells[b].get(s) for s in seeds]
        text = [f"{g[0]} ({g[1]:.1f})" if g else "-" for g in got]
        if all(got):
            steps = statistics.median(g[0] for g in got if g)
            secs = statistics.median(g[1] for g in got if g)
            best = min(best or (secs, b), (secs, b))
            text += [f"{steps:g}", f"{secs:.1f}"]
        else:
            text += ["-", "-"]
        out.append(f"| {b} | " + " | ".join(text) + " |")
    out.append(f"\nbest batch (least median seconds, every seed reached): {best and best[1]}")
    return "\n".join(out)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("out")
    t.add_argument("--suite", default=str(SUITE))
    t.add_argument("--models", default="")
    t.add_argument("--batch-sizes", default="")
    t.add_argument("--seeds", default="")
    t.add_argument("--image-size", type=int, default=None)
    t.add_argument("--lr", type=float, default=None)
    t.add_argument("--threads", type=int, default=None)
    t.add_argument("--max-steps", type=int, default=None)
    t.add_argument("--max-time", type=float, default=None)
    s = sub.add_parser("table")
    s.add_argument("files", nargs="+")
    s.add_argument("--target", action="append", default=[], help="MODEL:METRIC:VALUE")
    args = parser.parse_args(argv)
    train(args) if args.command == "train" else table(args)


if __name__ == "__main__":
    main(sys.argv[1:])
