"""How the machine's pace moves over short windows: one point's training steps timed in
back-to-back windows of WINDOW_S seconds for a few seconds.

    python scripts/pace.py MODEL/SIZE WINDOW_S [--seconds S] [--batch-size B]

Why `compare --ab` (gpubench/run/ab.py) times many short windows: it prints the spread of the
windows' samples/s about their mean (the standard deviation of their logarithm, and the 5th,
25th, 50th, 75th and 95th percentiles relative to the geometric mean), the correlation of a
window's pace with the pace 1, 2, 4, 8 and 16 windows later, and the spread of the ratio of
two windows in a row (what alternating two versions window by window leaves). The point: the
reference model at that preset on the CPU, fp32, AdamW, one intra-op thread (the gate's
defaults), batch 64 unless --batch-size says otherwise.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch

from gpubench.config.spec import Point
from gpubench.harness.step import build_workload, prepare

LAGS = (1, 2, 4, 8, 16)
PERCENTILES = (5, 25, 50, 75, 95)


def windows(step: Callable[[], object], window_s: float, seconds: float) -> list[float]:
    """Steps per second over back-to-back windows of at least `window_s` (a step at the
    least), for `seconds` in all."""
    rates = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < window_s or n == 0:
            step()
            n += 1
        rates.append(n / (time.perf_counter() - t0))
    return rates


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("point", help="MODEL/SIZE, e.g. mlp/tiny")
    cli.add_argument("window_s", type=float, help="seconds a window, e.g. 0.01")
    cli.add_argument("--seconds", type=float, default=6.0, help="seconds in all (default 6)")
    cli.add_argument("--batch-size", type=int, default=64)
    args = cli.parse_args()
    model, size = args.point.split("/")
    torch.set_num_threads(1)
    point = Point.of(
        {
            "model": model,
            "model_size": size,
            "device": "cpu",
            "batch_size": args.batch_size,
            "precision": "fp32",
            "optimizer": "adamw",
            "threads": 1,
        }
    )
    prepared = prepare(point, build_workload(point))
    for _ in range(20):  # warm
        prepared.step()
    logs = np.log(windows(prepared.step, args.window_s, args.seconds))
    logs -= logs.mean()
    acf = [(k, float(np.corrcoef(logs[:-k], logs[k:])[0, 1])) for k in LAGS if k < len(logs) - 2]
    half = len(logs) // 2
    pairs = logs[1 : 2 * half : 2] - logs[0 : 2 * half : 2]
    quantiles = np.exp(np.percentile(logs, PERCENTILES))
    print(f"{args.point} B={args.batch_size}: {len(logs)} windows of {args.window_s} s")
    print(f"  spread (sd of log samples/s): {logs.std():.3f}")
    print(
        "  percentiles "
        + ", ".join(f"{p}%: {q:.3f}" for p, q in zip(PERCENTILES, quantiles, strict=True))
    )
    print("  correlation at lags " + ", ".join(f"{k}: {c:.2f}" for k, c in acf))
    print(f"  two windows in a row, their ratio's spread (sd of log): {pairs.std():.3f}")


if __name__ == "__main__":
    main()
