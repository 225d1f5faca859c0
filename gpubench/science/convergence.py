"""A convergence run of one point: train on a real data set until a budget ends, evaluate on the
held-out split along the way, and record the learning curve and when a quality target was met.

Times are training time only: evaluation runs between timed stretches of training.
Steps-to-target is the step of the first evaluation that met the target, so it is known to within
the evaluation gap (see curve.next_eval_step). The gradient noise scale comes from the training
steps themselves (science.gradient_norms): one step in every `noise_every_steps` is measured, split
into `noise_splits` micro-batches where the point accumulates 1, and its extra time is stated.
"""

from __future__ import annotations

import contextlib
import math
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gpubench import models
from gpubench.config import precision
from gpubench.config.checks import split_reason
from gpubench.config.convergence import Convergence
from gpubench.config.errors import ConfigError
from gpubench.config.model_options import decode
from gpubench.config.spec import Point, SweepSpec
from gpubench.data import catalog
from gpubench.data.dataset import Batch, DataSet
from gpubench.harness import optimizers
from gpubench.harness.timing import Stats, StepMarks, synchronize
from gpubench.harness.train import Trainer, make_trainer
from gpubench.models.workload import Workload
from gpubench.probes import stretch_energy
from gpubench.probes.stretch_energy import StretchEnergy
from gpubench.science import gradient_noise, lr_scaling
from gpubench.science.curve import first_reaching, meets, next_eval_step
from gpubench.science.gradient_norms import GradientNorms
from gpubench.store.row import finite_or_none, make_row
from gpubench.store.wording import number, times

EVAL_CHUNK = 512  # held-out samples per forward pass


def prepare(spec: SweepSpec) -> None:
    """Load every data set the sweep needs before anything is written, so that a missing or
    malformed data folder is a ConfigError (exit status 2) rather than a row per point."""
    conv = spec.convergence
    for model in spec.models:
        try:
            catalog.load(model, spec.size, conv.dataset, conv.data_dir, conv.image_size)
        except ValueError as e:
            raise ConfigError(str(e)) from e


def target_of(conv: Convergence, model: str, dataset: str) -> tuple[str, float]:
    """The target metric and value for `model`: the suite's, else the data set's default."""
    metric, value = catalog.DEFAULT_TARGET[dataset]
    target = conv.target_for(model)
    if conv.target_metric is not None and conv.target_metric != metric:
        if target is None:
            raise ValueError(f"convergence.target_metric {conv.target_metric!r} needs a target")
        metric = conv.target_metric
    return metric, value if target is None else target


@torch.no_grad()
def evaluate(trainer: Trainer, batches: list[Batch]) -> tuple[float, float]:
    """Held-out (mean loss, accuracy) over `batches`, per sample (per token for a language
    model), in evaluation mode under the training precision's autocast."""
    model = trainer.model
    model.eval()
    loss_sum = torch.zeros((), device=trainer.device)
    correct = torch.zeros((), device=trainer.device)
    count = 0
    try:
        for x, y in batches:
            with torch.autocast(
                trainer.device.type,
                dtype=trainer.autocast_dtype or torch.float32,
                enabled=trainer.autocast_dtype is not None,
            ):
                out = model(x)
                loss = trainer.loss_fn(out, y)
            loss_sum += loss.float() * y.numel()
            correct += (out.argmax(dim=-1) == y).sum()
            count += y.numel()
    finally:
        model.train()
    return float(loss_sum) / count, float(correct) / count


@dataclass
class _Plan:
    """How one point trains: its learning-rate schedule and its limits."""

    base_lr: float
    peak_lr: float
    warmup: int
    max_steps: float  # may be infinite
    time_limit_s: float  # may be infinite


def _plan(point: Point, conv: Convergence) -> _Plan:
    assert point.lr_scaling is not None, "a convergence point carries its lr scaling rule"
    base = conv.lr if conv.lr is not None else optimizers.DEFAULT_LR[point.optimizer]
    peak = lr_scaling.scaled_lr(base, point.lr_scaling, point.batch_size, conv.base_batch_size)
    warmup = lr_scaling.warmup_steps(base, peak, conv.warmup_samples, point.batch_size)
    limits = [math.inf]
    if conv.max_steps is not None:
        limits.append(conv.max_steps)
    if conv.max_samples is not None:
        limits.append(max(1, conv.max_samples // point.batch_size))
    limit_s = conv.time_limit_s()
    return _Plan(base, peak, warmup, min(limits), math.inf if limit_s is None else limit_s)


class _Noise:
    """The gradient noise scale from the run's own steps: step s is measured where s >= 1, s >=
    `noise_from_step` (after a warm-up window) and s is a multiple of `noise_every_steps` (0:
    never), or s < `dense_until` (0 here; the noise phase measures its first steps densely, so
    that a short run gives a figure: science.noise_training)."""

    def __init__(self, conv: Convergence, trainer: Trainer) -> None:
        self.every = conv.noise_every_steps
        self.first = max(1, conv.noise_from_step)
        self.dense_until = 0
        self.norms = GradientNorms(trainer, conv.noise_splits) if self.every > 0 else None

    def measuring(self, step: int) -> contextlib.AbstractContextManager[None]:
        """The context step `step` trains in: measured where due, else nothing."""
        if self.norms is None or step < self.first:
            return nullcontext()
        if step >= self.dense_until and step % self.every:
            return nullcontext()
        return self.norms.measuring(step)

    def columns(self, batch_size: int, step_times: list[float]) -> dict[str, Any]:
        """The row's noise-scale columns (store.row): B_noise raw and (Adam, AdamW)
        preconditioned over the measured steps (their means; Fieller's interval from batch
        means), the step range, the micro-batches and whether they were split for the
        measurement, and the measurement's cost: the median measured step over the median
        other step, less 1, and the measured steps' extra seconds over the training time."""
        if self.norms is None:
            return {}
        numbers, raw, pre = self.norms.steps(batch_size)
        out: dict[str, Any] = {
            "noise_scale_micro_batches": self.norms.micro_batches,
            "noise_scale_split": self.norms.split,
            "noise_scale_steps": len(numbers),
            "noise_scale_first_step": min(numbers, default=None),
            "noise_scale_last_step": max(numbers, default=None),
        }
        for name, steps in (("b_noise", raw), ("b_noise_preconditioned", pre)):
            est = _estimate(steps)
            out[f"noise_scale_{name}"] = est and est.b_noise
            out[f"noise_scale_{name}_low"] = est and est.low and float(est.low)
            # an infinite high end (|G|^2 not told from 0) is stored as null
            out[f"noise_scale_{name}_high"] = est and est.high and finite_or_none(float(est.high))
            if name == "b_noise":
                out["noise_scale_skipped_steps"] = est.skipped if est else None
        measured = set(numbers)  # step s's time is step_times[s]
        hooked = [t for s, t in enumerate(step_times) if s in measured]
        plain = [t for s, t in enumerate(step_times) if s not in measured and s >= 1]
        if hooked and plain:
            typical = float(torch.tensor(plain).median())
            out["noise_scale_step_overhead"] = float(torch.tensor(hooked).median()) / typical - 1
            out["noise_scale_time_overhead"] = (sum(hooked) - len(hooked) * typical) / sum(
                step_times
            )
        return out


def _estimate(steps: list[gradient_noise.StepNorms]) -> gradient_noise.NoiseScale | None:
    """B_noise over `steps` (their means), or None with no finite step."""
    if not any(s.finite() for s in steps):
        return None
    return gradient_noise.noise_scale(steps, "mean")


def train_point(point: Point, conv: Convergence) -> dict[str, Any]:
    """Train `point` on its data set under `conv` and return its row. Errors (out of memory
    included) propagate to the caller (run.worker), which classifies them."""
    started = time.perf_counter()
    device = torch.device(point.device)
    reason = precision.unsupported_reason(point.precision, device)
    if reason is None and point.data != "device":
        reason = "convergence runs keep the data set on the device (data = 'device')"
    if reason is None:
        reason = _effective_batch_reason(point)
    if reason is not None:
        return make_row(point, "unsupported", error=reason)
    ds, overrides = catalog.load(
        point.model, point.model_size, conv.dataset, conv.data_dir, conv.image_size
    )
    if point.batch_size > ds.train_size:
        return make_row(
            point,
            "unsupported",
            error=f"batch size above the {ds.train_size} training samples of {ds.name}",
        )
    metric, target = target_of(conv, point.model, ds.name)
    torch.manual_seed(point.seed)
    options = {**decode(point.model_options), **overrides}  # the data set's shapes win
    workload = models.build(point.model, point.model_size, **options)
    run = Training(point, conv, ds, workload, metric, target)
    with precision.tf32_mode(precision.get(point.precision).tf32):
        run.train()
    return _row(run, ds, point_time_s=time.perf_counter() - started)


def _effective_batch_reason(point: Point) -> str | None:
    """issue 25: a batch that does not split into `accumulate` equal micro-batches, and
    checkpointing, which convergence runs do not take (it changes memory and speed, not what
    is learnt: a speed sweep measures it)."""
    if reason := split_reason(point.batch_size, point.accumulate):
        return reason
    if point.checkpoint != "none":
        return "convergence runs do not checkpoint (checkpoint = 'none'); a speed sweep does"
    return None


class Training:
    """One convergence run in progress: the trainer, its data, and what it has recorded."""

    def __init__(
        self,
        point: Point,
        conv: Convergence,
        ds: DataSet,
        workload: Workload,
        metric: str,
        target: float,
    ) -> None:
        self.point, self.conv, self.workload = point, conv, workload
        self.metric, self.target = metric, target
        self.device = torch.device(point.device)
        self.plan = _plan(point, conv)
        # issue 25: each step is one update over `accumulate` micro-batches of the batch; the
        # learning rate, its warm-up and the data order follow the effective batch
        self.trainer = make_trainer(
            workload,
            self.device,
            point.precision,
            point.optimizer,
            lr=self.plan.base_lr,
            accumulate=point.accumulate,
        )
        self.batches = ds.train_batches(point.batch_size, self.device, point.seed)
        self.held_out = ds.eval_batches(self.device, conv.eval_samples, EVAL_CHUNK)
        self.noise = _Noise(conv, self.trainer)
        self.curve: list[dict[str, Any]] = []
        self.step_times: list[float] = []
        self.train_time = self.eval_time = 0.0
        self.first_loss: float | None = None
        self.last_loss: float | None = None
        self.diverged: tuple[int, str] | None = None  # (step, reason)
        self.reached: dict[str, Any] | None = None  # the first curve entry that met the target
        self.step = 0
        self.energy = StretchEnergy(self.device)  # issue 32: joules to target

    def train(self, deadline: float | None = None) -> None:
        """Timed stretches of training, each followed by an evaluation, until a limit, the
        target (where the suite stops there) or divergence; where `deadline` is given (a
        time.perf_counter() value), also by that time, evaluations included: the training
        stops an evaluation's mean time before it (the noise phase's budget,
        science.noise_training)."""
        plan = self.plan
        self.record(None, plan.base_lr)
        while self.step < plan.max_steps and self.train_time < plan.time_limit_s:
            if deadline is not None:
                left = deadline - time.perf_counter() - self.eval_time / len(self.curve)
                if left <= 0:
                    break
                plan.time_limit_s = min(plan.time_limit_s, self.train_time + left)
            gap = next_eval_step(self.step, self.conv.eval_every_steps, self.conv.eval_rel_gap)
            losses, lr = self.stretch(min(gap, plan.max_steps))
            values = torch.stack(losses).float().cpu()
            mean = float(values.mean())
            self.check_divergence(values, mean)
            entry = self.record(mean, lr)
            if self.diverged:
                break
            if self.reached is None and meets(entry[self.metric], self.metric, self.target):
                self.reached = entry
                if self.conv.stop_at_target:
                    break
        assert self.reached is None or self.reached is first_reaching(
            self.curve, self.metric, self.target
        )

    def stretch(self, stop_at: float) -> tuple[list[Tensor], float]:
        """Train up to step `stop_at` (or the time limit) with no host sync inside; return the
        steps' losses (unsynchronised) and the learning rate reached."""
        plan, trainer = self.plan, self.trainer
        losses: list[Tensor] = []
        marks = StepMarks(self.device, int(stop_at) - self.step + 1)
        lr = plan.base_lr
        synchronize(self.device)
        self.energy.start()
        t0 = time.perf_counter()
        marks.mark()
        while self.step < stop_at:
            lr = lr_scaling.lr_at(self.step, plan.base_lr, plan.peak_lr, plan.warmup)
            if self.step <= plan.warmup:
                for group in trainer.optimizer.param_groups:
                    group["lr"] = lr
            with self.noise.measuring(self.step):
                losses.append(trainer.step(*next(self.batches)))
            marks.mark()
            self.step += 1
            if self.train_time + time.perf_counter() - t0 >= plan.time_limit_s:
                break
        synchronize(self.device)
        self.train_time += time.perf_counter() - t0
        self.energy.stop()
        self.step_times.extend(marks.step_times())
        return losses, lr

    def check_divergence(self, values: Tensor, mean: float) -> None:
        """Note the first non-finite loss of a stretch, or a mean loss that exceeds
        divergence_factor times the first one."""
        self.first_loss = float(values[0]) if self.first_loss is None else self.first_loss
        self.last_loss = float(values[-1])
        bad = (~torch.isfinite(values)).nonzero()
        factor = self.conv.divergence_factor
        if len(bad):
            at = self.step - len(values) + int(bad[0]) + 1
            self.diverged = (at, f"train loss became {float(values[int(bad[0])])} at step {at}")
        elif mean > factor * self.first_loss:
            self.diverged = (
                self.step,
                f"train loss {number(mean)} exceeded {times(factor)} "
                f"the first loss {number(self.first_loss)} by step {self.step}",
            )

    def record(self, train_loss: float | None, lr: float) -> dict[str, Any]:
        """Evaluate on the held-out set, outside the timed training, and append the curve's
        entry for the current step."""
        t0 = time.perf_counter()
        eval_loss, eval_acc = evaluate(self.trainer, self.held_out)
        synchronize(self.device)
        self.eval_time += time.perf_counter() - t0
        entry = {
            "step": self.step,
            "samples": self.step * self.point.batch_size,
            "time_s": self.train_time,
            "train_loss": finite_or_none(train_loss),
            "eval_loss": finite_or_none(eval_loss),
            "eval_accuracy": finite_or_none(eval_acc),
            "lr": lr,
            **self.energy.curve_entry(),
        }
        self.curve.append(entry)
        return entry


def _row(run: Training, ds: DataSet, point_time_s: float) -> dict[str, Any]:
    """The result row of a finished convergence run."""
    point, plan, reached, diverged = run.point, run.plan, run.reached, run.diverged
    last = run.curve[-1]
    stats = Stats.of(run.step_times) if run.step_times else None
    median = stats.median_s if stats else None
    tokens = run.workload.tokens(point.batch_size)
    return make_row(
        point,
        "diverged" if diverged else "ok",
        error=diverged[1] if diverged else None,
        optimizer_impl=run.trainer.optimizer_impl,
        workload=run.workload.name,
        parameters=run.workload.parameter_count(),
        samples_per_step=point.batch_size,
        tokens_per_step=tokens,
        **(stats.columns() if stats else {"steps_measured": 0}),
        wall_time_s=run.train_time,
        samples_per_s=point.batch_size / median if median else None,
        tokens_per_s=tokens / median if median and tokens else None,
        loss_first=run.first_loss,
        loss_last=run.last_loss,
        eval_loss=last["eval_loss"],
        eval_accuracy=last["eval_accuracy"],
        steps_to_target=reached and reached["step"],
        samples_to_target=reached and reached["samples"],
        time_to_target_s=reached and reached["time_s"],
        **stretch_energy.to_target(reached),
        torch_threads=torch.get_num_threads(),
        point_time_s=point_time_s,
        dataset=ds.name,
        dataset_sha256=ds.sha256(),
        target_metric=run.metric,
        target=run.target,
        lr=plan.peak_lr,
        lr_base=plan.base_lr,
        lr_base_batch_size=run.conv.base_batch_size,
        lr_warmup_steps=plan.warmup,
        eval_time_s=run.eval_time,
        diverged_at_step=diverged[0] if diverged else None,
        **run.noise.columns(point.batch_size, run.step_times),
        step_times_s=run.step_times,
        curve=run.curve,
    )
