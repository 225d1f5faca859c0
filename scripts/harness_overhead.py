"""Does the harness cost anything? Time a minimal hand-written training loop and gpubench's harness
side by side over the same Workload, interleaved, and print the ratio of their step times.

    PYTHONPATH=. python scripts/harness_overhead.py [--device cpu] [--rounds 7] [--steps 60]

Each round runs the hand-written loop for --steps steps (timed by one synchronised wall clock) and
the harness (gpubench.harness.timing.measure with a fixed budget of --steps steps, its
synchronised wall time), alternating which goes first. The figure is the median over rounds of
harness/minimal.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from gpubench import models
from gpubench.config import precision
from gpubench.config.spec import Budget
from gpubench.data.synthetic import Batches
from gpubench.harness.timing import measure, synchronize
from gpubench.harness.train import make_trainer

CASES = [
    ("mlp", "small", "fp32", "sgd", 64),
    ("cnn", "small", "fp32", "adamw", 32),
    ("transformer", "small", "fp32", "adamw", 16),
]
GPU_CASES = [
    ("mlp", "base", "bf16", "adamw", 256),
    ("cnn", "base", "bf16", "sgd", 256),
    ("transformer", "base", "bf16", "adamw", 8),
    ("mlp", "small", "fp32", "sgd", 64),  # launch-bound: where overhead would show first
]


def minimal_loop(model, opt, xs, ys, loss_fn, dtype, device, steps: int) -> float:
    """The loop a person would write by hand; returns seconds per step."""
    synchronize(device)
    t0 = time.perf_counter()
    for i in range(steps):
        x, y = xs[i % len(xs)], ys[i % len(ys)]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    synchronize(device)
    return (time.perf_counter() - t0) / steps


def run_case(case: tuple, device: torch.device, rounds: int, steps: int) -> dict:
    name, size, prec_name, opt_name, batch = case
    prec = precision.get(prec_name)
    torch.manual_seed(0)
    w = models.build(name, size)
    trainer = make_trainer(w, device, prec_name, opt_name)
    batches = Batches(w, batch, device)
    xs, ys = zip(*(batches.next() for _ in range(4)), strict=True)
    budget = Budget.fixed(steps, warmup_steps=3)
    ratios, hand, harness = [], [], []
    with precision.tf32_mode(prec.tf32):
        for _ in range(3):  # warm both paths
            minimal_loop(
                trainer.model, trainer.optimizer, xs, ys, w.loss_fn, prec.autocast, device, 3
            )
        for r in range(rounds):
            order = ("hand", "harness") if r % 2 == 0 else ("harness", "hand")
            got = {}
            for which in order:
                if which == "hand":
                    got[which] = minimal_loop(
                        trainer.model,
                        trainer.optimizer,
                        xs,
                        ys,
                        w.loss_fn,
                        prec.autocast,
                        device,
                        steps,
                    )
                else:
                    m = measure(lambda: trainer.step(*batches.next()), device, budget)
                    got[which] = m.wall_time_s / m.stats.n
            hand.append(got["hand"])
            harness.append(got["harness"])
            ratios.append(got["harness"] / got["hand"])
    return {
        "case": f"{name}/{size} {prec_name} {opt_name} B={batch}",
        "hand_ms": statistics.median(hand) * 1e3,
        "harness_ms": statistics.median(harness) * 1e3,
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    device = torch.device(args.device)
    cases = GPU_CASES if device.type == "cuda" else CASES
    print(
        f"device={device} torch={torch.__version__} threads={torch.get_num_threads()} "
        f"rounds={args.rounds} steps/round={args.steps}"
    )
    print(f"{'case':45} {'hand ms':>9} {'harness ms':>11} {'ratio':>7} {'range':>15}")
    for case in cases:
        r = run_case(case, device, args.rounds, args.steps)
        print(
            f"{r['case']:45} {r['hand_ms']:9.3f} {r['harness_ms']:11.3f} {r['ratio']:7.4f} "
            f"{r['ratio_min']:.4f}-{r['ratio_max']:.4f}"
        )


if __name__ == "__main__":
    main()
