"""Does transformer/tiny step as fast in the speed points (its preset vocabulary of 64,
synthetic batches cycled) as in a run to the target (the corpus's vocabulary of 98, fresh real
batches)? Interleaved rounds in one process at the default threads; prints each case's median
step (ms) per batch, over 5 rounds of 100 steps, and each round's."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import torch

from gpubench import models
from gpubench.config.spec import Point
from gpubench.config.suite import target_settings
from gpubench.data import catalog
from gpubench.harness.step import prepare

ROUNDS, STEPS, WARMUP = 5, 100, 10


def median_ms(step: Callable[[], object]) -> float:
    for _ in range(WARMUP):
        step()
    times = []
    for _ in range(STEPS):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def cases(batch: int) -> dict[str, Callable[[], object]]:
    conv = replace(target_settings("adamw"), noise_every_steps=0)
    ds, corpus = catalog.load("transformer", "tiny", conv.dataset, conv.data_dir, None)
    point = Point("transformer", "tiny", "cpu", "fp32", "adamw", batch)
    torch.manual_seed(0)
    preset = prepare(point, models.build("transformer", "tiny"))
    torch.manual_seed(0)
    trained = prepare(point, models.build("transformer", "tiny", **corpus))
    real = ds.train_batches(batch, torch.device("cpu"), 0)
    return {
        "speed point (vocabulary 64)": lambda: preset.step().item(),
        "vocabulary 98, synthetic": lambda: trained.step().item(),
        "vocabulary 98, the corpus": lambda: trained.trainer.step(*next(real)).item(),
    }


def main() -> None:
    for batch in (64, 256):
        steps = cases(batch)
        rounds: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(ROUNDS):
            for name, step in steps.items():
                rounds[name].append(median_ms(step))
        for name, ms in rounds.items():
            each = ", ".join(f"{m:.2f}" for m in ms)
            print(f"B={batch} {name}: {statistics.median(ms):.2f} ms ({each})")


if __name__ == "__main__":
    main()
