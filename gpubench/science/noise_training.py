"""The noise phase's training (science.noise_phase): a reference model built once, trained
straight on its real data set's train batches, each step measured or not by
science.gradient_norms' hooks, and B_noise over the measured steps. No evaluation, no data set
hash, no learning curve: the phase's seconds go to steps."""

from __future__ import annotations

import time

import torch

from gpubench import models
from gpubench.data import catalog
from gpubench.data.dataset import DataSet
from gpubench.harness import optimizers
from gpubench.harness.timing import synchronize
from gpubench.harness.train import make_trainer
from gpubench.science import gradient_noise, lr_scaling
from gpubench.science.gradient_norms import GradientNorms

BASE_BATCH = 32  # the batch the optimizer's default learning rate is for (config.convergence)

# (b_noise, low, high, kind, first step, last step, steps measured)
Estimate = tuple[float, float | None, float | None, str, int, int, int]


def load(model: str, size: str) -> tuple[DataSet, dict[str, object]]:
    """`model`'s real data set at preset `size` and the model overrides that fit it
    (data.catalog; loaded once a process)."""
    return catalog.load(model, size, "auto", None)


class NoiseTraining:
    """`model` at preset `size` on its data set in fp32 on `device`, `optimizer` at its default
    learning rate scaled from BASE_BATCH to `batch_size` (linear for SGD, sqrt for Adam and
    AdamW), a measured step split into `splits` micro-batches."""

    def __init__(
        self,
        model: str,
        size: str,
        optimizer: str,
        device: str,
        batch_size: int,
        splits: int,
        seed: int,
    ) -> None:
        ds, overrides = load(model, size)
        self.dataset = ds.name
        self.batch_size = batch_size
        self.device = torch.device(device)
        rule = "sqrt" if optimizer in ("adam", "adamw") else "linear"
        lr = lr_scaling.scaled_lr(optimizers.DEFAULT_LR[optimizer], rule, batch_size, BASE_BATCH)
        torch.manual_seed(seed)
        workload = models.build(model, size, **overrides)
        self.trainer = make_trainer(workload, self.device, "fp32", optimizer, lr=lr)
        self.norms = GradientNorms(self.trainer, splits)
        self.batches = ds.train_batches(batch_size, self.device, seed)
        self.steps = 0  # optimizer updates done
        self.measured = 0
        self.train_s = 0.0

    def step(self, measure: bool) -> None:
        """One update (measured by the hooks where `measure`), synchronised: its time is known."""
        t0 = time.perf_counter()
        if measure:
            with self.norms.measuring(self.steps):
                self.trainer.step(*next(self.batches))
            self.measured += 1
        else:
            self.trainer.step(*next(self.batches))
        synchronize(self.device)
        self.train_s += time.perf_counter() - t0
        self.steps += 1

    def estimate(self) -> Estimate | None:
        """B_noise over the measured steps (chosen(): preconditioned under Adam and AdamW, else
        raw; their means, Fieller's interval from batch means, an unbounded high end as None)
        with the steps it was taken over; None where no measured step gave a positive figure."""
        numbers, raw, pre = self.norms.steps(self.batch_size)
        figures = [
            (kind, gradient_noise.noise_scale(steps, "mean"))
            for kind, steps in (("preconditioned", pre), ("raw", raw))
            if any(s.finite() for s in steps)
        ]
        pick = chosen(figures)
        if pick is None:
            return None
        kind, est = pick
        assert est.b_noise is not None
        high = None if est.high is None or not float(est.high) < float("inf") else est.high
        low = None if est.low is None else float(est.low)
        return (
            float(est.b_noise),
            low,
            None if high is None else float(high),
            kind,
            min(numbers),
            max(numbers),
            len(numbers),
        )


def chosen(
    figures: list[tuple[str, gradient_noise.NoiseScale]],
) -> tuple[str, gradient_noise.NoiseScale] | None:
    """The figure the phase states, of (kind, B_noise) in order of preference (the
    preconditioned one first, where the optimizer has one): the first with a positive B_noise
    whose interval is bounded above, else the first with a positive B_noise; None where none
    has one. Early in a transformer's training under AdamW the preconditioned figure read 1e6-1e7
    with no upper bound (embedding rows whose Adam second moment is still about 0, divided by
    eps): a bounded raw figure says more than that."""
    positive = [(k, f) for k, f in figures if f.b_noise is not None and f.b_noise > 0]
    bounded = [(k, f) for k, f in positive if f.high is not None and float(f.high) < float("inf")]
    ranked = bounded or positive
    return ranked[0] if ranked else None
