"""A convergence run of one point: train on a real data set until a budget ends, evaluate on the
held-out split along the way, and record the learning curve and when a quality target was met.

Times are training time only: evaluation and noise-scale probes run between timed stretches of
training. Steps-to-target is the step of the first evaluation that met the target, so it is
known to within the evaluation gap (see curve.next_eval_step).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from gpubench import lr_scaling, models, optim, precision
from gpubench.curve import first_reaching, meets, next_eval_step
from gpubench.data import catalog
from gpubench.data.dataset import Batch, DataSet
from gpubench.noise_scale import NoiseScale, gradient_norms
from gpubench.results import make_row
from gpubench.runner import one_line
from gpubench.spec import ConfigError, Convergence, Point, SweepSpec
from gpubench.timing import Stats, StepMarks, synchronize
from gpubench.train import Trainer, make_trainer

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


def run_point(point: Point, spec: SweepSpec) -> dict[str, Any]:
    """A convergence point's row, whatever happens: out of memory becomes an `oom` row and any
    other exception an `error` row."""
    try:
        return train_point(point, spec.convergence)
    except (torch.OutOfMemoryError, MemoryError) as e:
        return make_row(point, "oom", error=one_line(e))
    except Exception as e:  # the sweep records the failure as data and goes on
        return make_row(point, "error", error=one_line(e))
    finally:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def target_of(conv: Convergence, model: str, dataset: str) -> tuple[str, float]:
    """The target metric and value for `model`: the suite's, else the data set's default."""
    metric, value = catalog.DEFAULT_TARGET[dataset]
    target = conv.target_for(model)
    if conv.target_metric is not None and conv.target_metric != metric:
        if target is None:
            raise ValueError(f"convergence.target_metric {conv.target_metric!r} needs a target")
        metric = conv.target_metric
    return metric, value if target is None else target


def _finite(value: float | None) -> float | None:
    """JSON holds no NaN or infinity: a non-finite value is stored as None."""
    return value if value is not None and math.isfinite(value) else None


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
    base = conv.lr if conv.lr is not None else optim.DEFAULT_LR[point.optimizer]
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
    """Measures the gradient noise scale every `every` steps on its own stream of samples."""

    def __init__(self, conv: Convergence, ds: DataSet, device: torch.device, seed: int) -> None:
        self.every = conv.noise_every_steps
        self.splits = conv.noise_splits
        self.scale = NoiseScale(conv.noise_ema)
        self.next_step = 0
        self.batches: Iterator[Batch] | None = None
        if self.every > 0:
            n = min(conv.noise_samples, ds.train_size)
            self.batches = ds.train_batches(n, device, seed + 1_000_003)

    def maybe_measure(self, step: int, model: nn.Module, loss_fn: Callable) -> float | None:
        """B_simple after a measurement at `step` if one is due, else None."""
        if self.batches is None or step < self.next_step:
            return None
        x, y = next(self.batches)
        self.scale.update(*gradient_norms(model, loss_fn, x, y, self.splits))
        self.next_step = step + self.every
        return self.scale.b_simple


def train_point(point: Point, conv: Convergence) -> dict[str, Any]:
    """Train `point` on its data set under `conv` and return its row."""
    started = time.perf_counter()
    device = torch.device(point.device)
    reason = precision.unsupported_reason(point.precision, device)
    if reason is None and point.data != "device":
        reason = "convergence runs keep the data set on the device (data = 'device')"
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
    plan = _plan(point, conv)
    torch.manual_seed(point.seed)
    workload = models.build(point.model, point.model_size, **overrides)
    trainer = make_trainer(workload, device, point.precision, point.optimizer, lr=plan.base_lr)
    train = ds.train_batches(point.batch_size, device, point.seed)
    held_out = ds.eval_batches(device, conv.eval_samples, EVAL_CHUNK)
    noise = _Noise(conv, ds, device, point.seed)

    curve: list[dict[str, Any]] = []
    step_times: list[float] = []
    train_time = eval_time = 0.0
    first_loss = last_loss = None
    diverged: tuple[int, str] | None = None
    reached: dict[str, Any] | None = None
    step = 0

    def record(train_loss: float | None, lr: float) -> dict[str, Any]:
        nonlocal eval_time
        t0 = time.perf_counter()
        eval_loss, eval_acc = evaluate(trainer, held_out)
        b_simple = noise.maybe_measure(step, trainer.model, trainer.loss_fn)
        synchronize(device)
        eval_time += time.perf_counter() - t0
        entry = {
            "step": step,
            "samples": step * point.batch_size,
            "time_s": train_time,
            "train_loss": _finite(train_loss),
            "eval_loss": _finite(eval_loss),
            "eval_accuracy": _finite(eval_acc),
            "lr": lr,
            "b_simple": b_simple,
        }
        curve.append(entry)
        return entry

    with precision.tf32_mode(precision.get(point.precision).tf32):
        record(None, plan.base_lr)
        while step < plan.max_steps and train_time < plan.time_limit_s:
            stop_at = min(
                next_eval_step(step, conv.eval_every_steps, conv.eval_rel_gap), plan.max_steps
            )
            losses: list[Tensor] = []
            marks = StepMarks(device, int(stop_at) - step + 1)
            synchronize(device)
            t0 = time.perf_counter()
            marks.mark()
            while step < stop_at:
                lr = lr_scaling.lr_at(step, plan.base_lr, plan.peak_lr, plan.warmup)
                if step <= plan.warmup:
                    for group in trainer.optimizer.param_groups:
                        group["lr"] = lr
                losses.append(trainer.step(*next(train)))
                marks.mark()
                step += 1
                if train_time + time.perf_counter() - t0 >= plan.time_limit_s:
                    break
            synchronize(device)
            train_time += time.perf_counter() - t0
            step_times.extend(marks.step_times())
            values = torch.stack(losses).float().cpu()
            first_loss = float(values[0]) if first_loss is None else first_loss
            last_loss = float(values[-1])
            bad = (~torch.isfinite(values)).nonzero()
            mean = float(values.mean())
            if len(bad):
                at = step - len(values) + int(bad[0]) + 1
                diverged = (at, f"train loss became {float(values[int(bad[0])])} at step {at}")
            elif mean > conv.divergence_factor * first_loss:
                diverged = (
                    step,
                    f"train loss {mean:.4g} exceeded {conv.divergence_factor}x "
                    f"the first loss {first_loss:.4g} by step {step}",
                )
            entry = record(mean, lr)
            if diverged:
                break
            if reached is None and meets(entry[metric], metric, target):
                reached = entry
                if conv.stop_at_target:
                    break

    assert reached is None or reached is first_reaching(curve, metric, target)
    last = curve[-1]
    stats = Stats.of(step_times) if step_times else None
    tokens = workload.tokens(point.batch_size)
    return make_row(
        point,
        "diverged" if diverged else "ok",
        error=diverged[1] if diverged else None,
        optimizer_impl=trainer.optimizer_impl,
        parameters=workload.parameter_count(),
        samples_per_step=point.batch_size,
        tokens_per_step=tokens,
        steps_measured=len(step_times),
        step_time_s=stats.median_s if stats else None,
        step_time_mean_s=stats.mean_s if stats else None,
        step_time_iqr_s=stats.iqr_s if stats else None,
        step_time_p90_s=stats.p90_s if stats else None,
        step_time_cv=stats.cv if stats else None,
        step_time_ci_rel=stats.ci_rel if stats else None,
        wall_time_s=train_time,
        samples_per_s=point.batch_size / stats.median_s if stats else None,
        tokens_per_s=tokens / stats.median_s if stats and tokens else None,
        loss_first=first_loss,
        loss_last=last_loss,
        eval_loss=last["eval_loss"],
        eval_accuracy=last["eval_accuracy"],
        steps_to_target=reached["step"] if reached else None,
        samples_to_target=reached["samples"] if reached else None,
        time_to_target_s=reached["time_s"] if reached else None,
        torch_threads=torch.get_num_threads(),
        point_time_s=time.perf_counter() - started,
        dataset=ds.name,
        dataset_sha256=ds.sha256(),
        target_metric=metric,
        target=target,
        lr=plan.peak_lr,
        lr_base=plan.base_lr,
        lr_base_batch_size=conv.base_batch_size,
        lr_warmup_steps=plan.warmup,
        eval_time_s=eval_time,
        diverged_at_step=diverged[0] if diverged else None,
        noise_scale_b_simple=noise.scale.b_simple,
        step_times_s=step_times,
        curve=curve,
    )
