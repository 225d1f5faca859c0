"""The noise phase's training (science.noise_phase): one run of a reference model toward its
quality target on its real data set, a convergence run (science.convergence.Training) under the
settings its prediction is checked under, with a time limit, and the gradient norms of its
measured steps cut into stretches along the run (science.noise_path)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gpubench import models
from gpubench.config.convergence import Convergence
from gpubench.config.spec import Point
from gpubench.data import catalog
from gpubench.data.dataset import DataSet
from gpubench.science.convergence import Training, target_of
from gpubench.science.gradient_noise import StepNorms
from gpubench.science.noise_path import Stretch, stretch_of

SPLITS = 4  # micro-batches of a measured step: the statistic compares them with their mean
EVERY = 4  # one update in EVERY is measured (the convergence suite's noise_every_steps)
STRETCH_MEASURED = 8  # measured steps a stretch of the path holds (its last holds the rest)


def load(model: str, size: str, conv: Convergence) -> tuple[DataSet, dict[str, Any]]:
    """`model`'s data set under `conv` at preset `size` and the model overrides that fit it
    (data.catalog; each data set loaded once a process)."""
    return catalog.load(model, size, conv.dataset, conv.data_dir, conv.image_size)


@dataclass(frozen=True)
class Path:
    """What a run toward the target measured: `stretches` of raw and (Adam, AdamW)
    `preconditioned` norms (each stretch: its updates and mean estimates), the run's `steps`
    (updates), `measured` steps, training seconds `train_s`, its `metric`, `target`, the
    metric's first and last held-out values and whether the target was `reached`."""

    dataset: str
    raw: tuple[Stretch, ...]
    preconditioned: tuple[Stretch, ...]
    steps: int
    measured: int
    train_s: float
    metric: str
    target: float
    first: float | None
    last: float | None
    reached: bool


def stretches(
    numbers: Sequence[int], norms: Sequence[StepNorms], steps: int, per: int = STRETCH_MEASURED
) -> tuple[Stretch, ...]:
    """The run of `steps` updates cut after every `per` measured steps (`numbers`: the updates
    done before each measured step, ascending; `norms`: theirs), the updates after the last full
    stretch joined to it; a stretch with no finite norm is left out (its updates with it)."""
    out: list[Stretch] = []
    cuts = list(range(per, len(numbers) - per + 1, per)) if len(numbers) >= 2 * per else []
    start_step, start = 0, 0
    for cut in [*cuts, len(numbers)]:
        end_step = numbers[cut] if cut < len(numbers) else steps
        if end_step > start_step and cut > start:
            s = stretch_of(end_step - start_step, norms[start:cut])
            if s is not None:
                out.append(s)
        start_step, start = end_step, cut
    return tuple(out)


def train(
    model: str,
    size: str,
    optimizer: str,
    device: str,
    batch_size: int,
    seed: int,
    conv: Convergence,
    limit_s: float,
) -> Path:
    """Train `model` at preset `size` on `conv`'s data set in fp32 on `device` at `batch_size`
    (`conv`'s learning rate, rule and warm-up; seed `seed`) until its target or `limit_s`
    training seconds, measuring one update in EVERY split into SPLITS micro-batches."""
    ds, overrides = load(model, size, conv)
    rule = conv.lr_scaling_for(optimizer)[0]
    fields = dict(model=model, model_size=size, device=device, precision="fp32")
    fields |= dict(optimizer=optimizer, batch_size=batch_size, seed=seed)
    point = Point.of({**fields, "lr_scaling": rule, "data": "device"})
    run_conv = dataclasses.replace(
        conv,
        stop_at_target=True,
        max_time_s=limit_s,
        max_steps=None,
        max_samples=None,
        noise_every_steps=EVERY,
        noise_from_step=0,
        noise_splits=SPLITS,
    )
    metric, target = target_of(run_conv, model, ds.name)
    torch.manual_seed(seed)
    run = Training(point, run_conv, ds, models.build(model, size, **overrides), metric, target)
    run.train()
    assert run.noise.norms is not None
    numbers, raw, pre = run.noise.norms.steps(batch_size)
    return Path(
        dataset=ds.name,
        raw=stretches(numbers, raw, run.step),
        preconditioned=stretches(numbers, pre, run.step) if pre else (),
        steps=run.step,
        measured=len(numbers),
        train_s=run.train_time,
        metric=metric,
        target=target,
        first=run.curve[0][metric],
        last=run.curve[-1][metric],
        reached=run.reached is not None,
    )
