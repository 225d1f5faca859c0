"""Per micro-batch and accumulated squared gradient norms of training steps, taken with hooks on
the step's own backward passes: the norms the gradient noise scale needs
(science.gradient_noise), with no extra forward or backward pass.

A step measured here runs as `Trainer.step` always does, in k >= 2 equal micro-batches (a
trainer that accumulates 1 is split into `splits` for the measured step: the same mean
gradient, BatchNorm statistics aside). A hook on each parameter sees each micro-batch's gradient
before autograd adds it to `.grad`: it was taken of loss/k (and times the loss scale under a
GradScaler), so it is scaled back to the micro-batch's own mean-loss gradient. An optimizer
step pre-hook reads the accumulated `.grad` (unscaled by then) before the update. Under Adam and
AdamW the same norms are also taken of every gradient divided by the preconditioner
sqrt(v / (1 - beta2^t)) + eps of the state before the step (ones before the optimizer's 5th
step, AdaptDL's rule). The norms stay on the device (float64) until `steps()` reads them, after
the timed training: a measured step adds no host sync.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from gpubench.harness.train import Trainer
from gpubench.science.gradient_noise import PRECONDITION_FROM_STEP, StepNorms


@dataclass
class _Measured:
    """One measured step's norms, on the device: raw and preconditioned (None: not Adam)."""

    step: int
    micro: Tensor  # (k,) |g_i|^2
    micro_pre: Tensor | None
    total: Tensor | None = None  # set by the optimizer's step pre-hook; None: step skipped
    total_pre: Tensor | None = None


def _adam(optimizer: torch.optim.Optimizer) -> bool:
    return isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW)


class GradientNorms:
    """Collects the squared gradient norms of the training steps run inside `measuring`."""

    def __init__(self, trainer: Trainer, splits: int) -> None:
        if splits < 2:
            raise ValueError(f"a step needs >= 2 micro-batches to measure, got {splits}")
        self.trainer = trainer
        self.micro_batches = trainer.accumulate if trainer.accumulate >= 2 else splits
        self.split = trainer.accumulate < 2  # measured steps are split only for the measurement
        self.preconditioned = _adam(trainer.optimizer)
        self._measured: list[_Measured] = []

    def _inverse_preconditioner(self, updates_done: int) -> dict[Tensor, Tensor]:
        """1 / (sqrt(v_hat) + eps) per parameter from the optimizer's state before this step
        ({} before PRECONDITION_FROM_STEP updates: the preconditioner is ones)."""
        if updates_done < PRECONDITION_FROM_STEP:
            return {}
        out = {}
        for group in self.trainer.optimizer.param_groups:
            beta2, eps = group["betas"][1], group["eps"]
            for p in group["params"]:
                v = self.trainer.optimizer.state.get(p, {}).get("exp_avg_sq")
                if v is not None:
                    out[p] = 1 / ((v.double() / (1 - beta2**updates_done)).sqrt() + eps)
        return out

    @contextlib.contextmanager
    def measuring(self, updates_done: int) -> Iterator[None]:
        """The training step run in this block is measured: `updates_done` is the optimizer's
        updates before it (the Adam step count, known without reading the device)."""
        trainer, k = self.trainer, self.micro_batches
        device = next(trainer.model.parameters()).device
        rec = _Measured(
            updates_done,
            torch.zeros(k, dtype=torch.float64, device=device),
            torch.zeros(k, dtype=torch.float64, device=device) if self.preconditioned else None,
        )
        inverse = self._inverse_preconditioner(updates_done) if self.preconditioned else {}
        # the backward of loss/k (times the loss scale): back to each micro-batch's own gradient
        factor: Tensor | float = float(k)
        # the scaler's own scale tensor: get_scale() would read it from the device
        if trainer.scaler is not None and trainer.scaler._scale is not None:
            factor = k / trainer.scaler._scale.double()
        index = [-1]

        def next_micro(module: object, args: object) -> None:
            if torch.is_grad_enabled():
                index[0] += 1

        def on_grad(p: Tensor) -> torch.utils.hooks.RemovableHandle:
            def hook(g: Tensor) -> None:
                i = min(index[0], k - 1)
                g = g.detach().double() * factor
                rec.micro[i] += g.square().sum()
                if rec.micro_pre is not None:
                    inv = inverse.get(p)
                    rec.micro_pre[i] += (g if inv is None else g * inv).square().sum()

            return p.register_hook(hook)

        def before_update(optimizer: object, args: object, kwargs: object) -> None:
            grads = [(p, p.grad) for p in trainer.model.parameters() if p.grad is not None]
            zero = torch.zeros((), dtype=torch.float64, device=device)
            rec.total = sum((g.double().square().sum() for _, g in grads), zero)
            if rec.micro_pre is not None:
                pre = [g.double() * inverse[p] if p in inverse else g.double() for p, g in grads]
                rec.total_pre = sum((g.square().sum() for g in pre), zero)

        params = [p for p in trainer.model.parameters() if p.requires_grad]
        handles = [on_grad(p) for p in params]
        handles.append(trainer.model.register_forward_pre_hook(next_micro))
        handles.append(trainer.optimizer.register_step_pre_hook(before_update))
        kept = trainer.accumulate
        trainer.accumulate = k
        try:
            yield
        finally:
            trainer.accumulate = kept
            for h in handles:
                h.remove()
        assert index[0] == k - 1, f"{index[0] + 1} forwards in a step of {k} micro-batches"
        self._measured.append(rec)

    def steps(self, batch_size: int) -> tuple[list[int], list[StepNorms], list[StepNorms]]:
        """The measured steps (their updates done before), their raw norms and their
        preconditioned norms ([] where the optimizer is not Adam); a step the loss scaler
        skipped (an inf or NaN gradient) is dropped from all three. Reads the device."""
        k = self.micro_batches
        sizes = (batch_size // k,) * k
        numbers: list[int] = []
        raw: list[StepNorms] = []
        pre: list[StepNorms] = []
        for rec in self._measured:
            if rec.total is None:
                continue
            numbers.append(rec.step)
            raw.append(StepNorms(tuple(rec.micro.tolist()), sizes, float(rec.total)))
            if rec.micro_pre is not None and rec.total_pre is not None:
                pre.append(StepNorms(tuple(rec.micro_pre.tolist()), sizes, float(rec.total_pre)))
        return numbers, raw, pre
