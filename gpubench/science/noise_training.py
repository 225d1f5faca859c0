"""The noise phase's training (science.noise_phase): one run of a reference model toward its
quality target on its real data set, a convergence run (science.convergence.Training) under the
settings its prediction is checked under, until a deadline, and the gradient norms of its
steps cut into stretches along the run (science.noise_path).

The first DENSE_STEPS updates are all measured (split into SPLITS micro-batches), so that a
share too short to go far still gives MIN_STRETCHES stretches; after them one update in EVERY
is, so that a run that goes the whole way to its target costs little more than training
(a measured update of B=64 took 2.5 plain ones for cnn/tiny on 8x8 digits, 1.8 for
transformer/tiny, on one thread of the quiet 2-core CPU).

The held-out evaluations only tell where the run is against its target, so they are fewer and
smaller than a convergence row's: every EVAL_EVERY updates, on EVAL_SAMPLES held-out samples
(a convergence row's gaps of 5% of the updates done evaluated transformer/small after each of
its first 20 updates, 0.3 s each for 256 samples on one thread, against 45 ms an update). The
target is then located to within EVAL_EVERY updates."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gpubench import models
from gpubench.config.convergence import Convergence
from gpubench.config.spec import Point
from gpubench.data import catalog
from gpubench.data.dataset import DataSet
from gpubench.harness.timing import synchronize
from gpubench.science.convergence import Training, target_of
from gpubench.science.gradient_noise import StepNorms
from gpubench.science.noise_path import MIN_STRETCHES, STRETCH_MEASURED, Stretch, stretch_of

SPLITS = 4  # micro-batches of a measured step: the statistic compares them with their mean
EVERY = 4  # the convergence suite's noise_every_steps
DENSE_STEPS = MIN_STRETCHES * STRETCH_MEASURED + 1  # update 0 is not measured
EVAL_EVERY = 50
EVAL_SAMPLES = 128


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


def _run(
    model: str,
    size: str,
    optimizer: str,
    device: str,
    batch_size: int,
    seed: int,
    conv: Convergence,
) -> tuple[Training, DataSet]:
    """The run, built: `conv`'s data set, learning rate, rule and warm-up, its updates measured
    and evaluated as the module's docstring says, stopping at the target."""
    ds, overrides = load(model, size, conv)
    rule = conv.lr_scaling_for(optimizer)[0]
    fields = dict(model=model, model_size=size, device=device, precision="fp32")
    fields |= dict(optimizer=optimizer, batch_size=batch_size, seed=seed)
    point = Point.of({**fields, "lr_scaling": rule, "data": "device"})
    run_conv = dataclasses.replace(
        conv,
        stop_at_target=True,
        max_time_s=None,
        max_steps=None,
        max_samples=None,
        eval_every_steps=EVAL_EVERY,
        eval_rel_gap=0.0,
        eval_samples=EVAL_SAMPLES,
        noise_every_steps=EVERY,
        noise_from_step=0,
        noise_splits=SPLITS,
    )
    metric, target = target_of(run_conv, model, ds.name)
    torch.manual_seed(seed)
    workload = models.build(model, size, **overrides)
    run = Training(point, run_conv, ds, workload, metric, target)
    run.noise.dense_until = DENSE_STEPS
    return run, ds


def step_s(
    model: str, size: str, optimizer: str, device: str, batch_size: int, conv: Convergence
) -> float:
    """Seconds of one measured update at `batch_size`, on a run built for it and then dropped
    (in a sweep's worker the one-time costs were paid by its points)."""
    run, _ = _run(model, size, optimizer, device, batch_size, 0, conv)
    assert run.noise.norms is not None
    t0 = time.perf_counter()
    with run.noise.norms.measuring(1):
        run.trainer.step(*next(run.batches))
    synchronize(run.device)
    return time.perf_counter() - t0


def train(
    model: str,
    size: str,
    optimizer: str,
    device: str,
    batch_size: int,
    seed: int,
    conv: Convergence,
    deadline: float,
) -> Path:
    """Train `model` at preset `size` on `conv`'s data set in fp32 on `device` at `batch_size`
    (`conv`'s learning rate, rule and warm-up; seed `seed`) until its target or `deadline` (a
    time.perf_counter() value, evaluations included)."""
    run, ds = _run(model, size, optimizer, device, batch_size, seed, conv)
    run.train(deadline)
    assert run.noise.norms is not None
    numbers, raw, pre = run.noise.norms.steps(batch_size)
    return Path(
        dataset=ds.name,
        raw=stretches(numbers, raw, run.step),
        preconditioned=stretches(numbers, pre, run.step) if pre else (),
        steps=run.step,
        measured=len(numbers),
        train_s=run.train_time,
        metric=run.metric,
        target=run.target,
        first=run.curve[0][run.metric],
        last=run.curve[-1][run.metric],
        reached=run.reached is not None,
    )
