"""Does NVML sampling slow the step it measures? On a CUDA machine, time a launch-bound step
(the small MLP, fp32, SGD, B=64: its step is mostly Python launching kernels) with no sampler,
with the sampler on a thread of the measuring process (how gpubench sampled before issue 13),
and with the sampler in a process of its own (probes.sampler_process, what gpubench does now),
interleaved over rounds in a rotating order, and print each mode's median step time against
none.

    PYTHONPATH=. python scripts/sampler_overhead.py [--rounds 15] [--steps 300]

Not run for issue 13 (no GPU was lent to it); its figures belong in the README when it is.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch

from gpubench.config.spec import Budget, Point
from gpubench.harness.step import prepare
from gpubench.harness.timing import measure
from gpubench.models import build
from gpubench.probes import nvml
from gpubench.probes.sampler_process import ProcessSampler


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--rounds", type=int, default=15)
    args.add_argument("--steps", type=int, default=300)
    opts = args.parse_args()
    if not torch.cuda.is_available() or nvml.unavailable_reason() is not None:
        raise SystemExit(f"needs CUDA and NVML ({nvml.unavailable_reason()})")
    device = torch.device("cuda")
    point = Point("mlp", "small", "cuda", "fp32", "sgd", 64)
    step = prepare(point, build("mlp", "small")).step
    dev = nvml.Device(torch.cuda.current_device())
    modes: dict[str, Callable[[], AbstractContextManager[Any]]] = {
        "none": contextlib.nullcontext,
        "thread": lambda: nvml.Sampler(dev.read),
        "process": lambda: ProcessSampler(
            "gpubench.probes.nvml:device_reader", (dev.uuid(), os.getpid())
        ),
    }
    budget = Budget.fixed(opts.steps, warmup_steps=20)
    medians: dict[str, list[float]] = {m: [] for m in modes}
    names = list(modes)
    for r in range(opts.rounds):
        for name in names[r % 3 :] + names[: r % 3]:  # rotate which mode goes first
            m = measure(step, device, budget, probe=modes[name]())
            medians[name].append(m.stats.median_s)
    base = statistics.median(medians["none"])
    for name, values in medians.items():
        med = statistics.median(values)
        print(f"{name:8} median step {med * 1e3:.4f} ms  ({(med / base - 1) * 100:+.2f}% vs none)")


if __name__ == "__main__":
    main()
