"""Is the order of compiled configurations repeatable between processes? (issue 24's cnn finding)

Runs the verdict's interleaved re-measurement (harness.interleave) of the same configurations
in RUNS fresh processes one after the other, each compiling into a fresh torch.compile cache,
and prints each process's median ratio of every configuration to the first, with the 95%
interval the verdict would give (science.leaders). Where processes disagree beyond their own
intervals, a single run's confirmation does not cover the difference between compilations.

Usage: python scripts/compile_repeatability.py [--model cnn] [--size small] [--precision bf16]
           [--threads 2] [--batch-sizes 128,256,512] [--compile compile] [--runs 3]
           [--budget 40]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile


def one(args: argparse.Namespace) -> dict[str, object]:
    """In this process: the interleaved rounds of the configurations, as ratios to the first."""
    import numpy as np

    from gpubench.config.spec import Point
    from gpubench.harness.interleave import interleave
    from gpubench.science.leaders import _compare

    points = [
        Point(args.model, args.size, "cpu", args.precision, "adamw", int(b),
              compile=args.compile, threads=args.threads)
        for b in args.batch_sizes.split(",")
    ]  # fmt: skip
    rounds = interleave(points, args.budget, 1.0, 6, 40)
    first = np.asarray(rounds.samples_per_s[0])
    out: dict[str, object] = {"rounds": len(first), "setup_s": round(rounds.setup_s, 1)}
    for i, (p, rates) in enumerate(zip(points[1:], rounds.samples_per_s[1:], strict=True)):
        c = _compare(np.asarray(rates), first, i)  # this one over the first, per round
        out[f"B={p.batch_size}/B={points[0].batch_size}"] = [
            round(c.low, 3), round(c.ratio, 3), round(c.high, 3)
        ]  # fmt: skip
    out["busy"] = rounds.busy
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="cnn")
    p.add_argument("--size", default="small")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-sizes", default="128,256,512")
    p.add_argument("--compile", default="compile")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--budget", type=float, default=40.0)
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.inner:
        print(json.dumps(one(a)))
        return 0
    for run in range(a.runs):
        with tempfile.TemporaryDirectory(prefix="gpubench-inductor-") as cache:
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
            done = subprocess.run(
                [sys.executable, __file__, *sys.argv[1:], "--inner"],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
        load = os.getloadavg()[0]
        print(f"process {run}: {done.stdout.strip()} (load average {load:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
