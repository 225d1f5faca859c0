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
step, AdaptDL's rule), built once a step per parameter from the optimizer's own state, in its
dtype, the first time a hook needs it. Each parameter's norm is one reduction in the gradient's
own dtype (torch's norm kernels accumulate float32 in float64 on the CPU and in float32 on CUDA:
float error only), scaled after the reduction, not before; the parameters' norms are summed in
float64 when `steps()` reads them, after the timed training: a measured step adds no host sync.
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
    """One measured step's per-parameter norms |g|, on the device, before `factor`: raw and
    preconditioned (None: not Adam), per micro-batch and of the accumulated gradient."""

    step: int
    factor: Tensor | float  # a micro-batch's norm times this is its own mean-loss gradient's
    micro: list[list[Tensor]]
    micro_pre: list[list[Tensor]] | None
    total: list[Tensor] | None = None  # set by the optimizer's step pre-hook; None: skipped
    total_pre: list[Tensor] | None = None


def _adam(optimizer: torch.optim.Optimizer) -> bool:
    return isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW)


def _norm(g: Tensor) -> Tensor:
    """|g| as one reduction (float32 and wider as they are; half types in float32)."""
    return torch.linalg.vector_norm(g, dtype=None if g.dtype.itemsize >= 4 else torch.float32)


def _squared(norms: list[Tensor], factor: Tensor | float) -> float:
    """sum |g_p|^2 over the parameters' norms, in float64, times factor^2 (reads the device)."""
    if not norms:
        return 0.0
    return float(torch.stack([n.double() for n in norms]).square().sum() * factor**2)


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
        # (beta2, eps) of each parameter's group: Adam's and AdamW's, {} for another optimizer
        self._groups = {
            p: (group["betas"][1], group["eps"])
            for group in trainer.optimizer.param_groups
            for p in group["params"]
            if self.preconditioned
        }

    def _inverse(
        self, p: Tensor, updates_done: int, built: dict[Tensor, Tensor | None]
    ) -> Tensor | None:
        """1 / (sqrt(v_hat) + eps) of `p` from the optimizer's state before this step, built on
        first use in the step and kept in `built`; None (the preconditioner is ones) before
        PRECONDITION_FROM_STEP updates or where `p` has no state."""
        if p in built:
            return built[p]
        inv = None
        v = self.trainer.optimizer.state.get(p, {}).get("exp_avg_sq")
        if updates_done >= PRECONDITION_FROM_STEP and v is not None:
            beta2, eps = self._groups[p]
            inv = (v / (1 - beta2**updates_done)).sqrt_().add_(eps).reciprocal_()
        built[p] = inv
        return inv

    @contextlib.contextmanager
    def measuring(self, updates_done: int) -> Iterator[None]:
        """The training step run in this block is measured: `updates_done` is the optimizer's
        updates before it (the Adam step count, known without reading the device)."""
        trainer, k = self.trainer, self.micro_batches
        # the backward of loss/k (times the loss scale): back to each micro-batch's own gradient
        factor: Tensor | float = float(k)
        # the scaler's own scale tensor (a copy: update() changes it in place after the step);
        # get_scale() would read it from the device
        if trainer.scaler is not None and trainer.scaler._scale is not None:
            factor = k / trainer.scaler._scale.double()
        pre = self.preconditioned
        rec = _Measured(
            updates_done,
            factor,
            [[] for _ in range(k)],
            [[] for _ in range(k)] if pre else None,
        )
        built: dict[Tensor, Tensor | None] = {}
        index = [-1]

        def next_micro(module: object, args: object) -> None:
            if torch.is_grad_enabled():
                index[0] += 1

        def on_grad(p: Tensor) -> torch.utils.hooks.RemovableHandle:
            def hook(g: Tensor) -> None:
                i = min(index[0], k - 1)
                g = g.detach()
                rec.micro[i].append(_norm(g))
                if rec.micro_pre is not None:
                    inv = self._inverse(p, updates_done, built)
                    rec.micro_pre[i].append(_norm(g if inv is None else g * inv))

            return p.register_hook(hook)

        def before_update(optimizer: object, args: object, kwargs: object) -> None:
            grads = [(p, p.grad.detach()) for p in trainer.model.parameters() if p.grad is not None]
            rec.total = [_norm(g) for _, g in grads]
            if pre:
                invs = [(g, self._inverse(p, updates_done, built)) for p, g in grads]
                rec.total_pre = [_norm(g if inv is None else g * inv) for g, inv in invs]

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
            micro = tuple(_squared(m, rec.factor) for m in rec.micro)
            raw.append(StepNorms(micro, sizes, _squared(rec.total, 1.0)))
            if rec.micro_pre is not None and rec.total_pre is not None:
                micro_pre = tuple(_squared(m, rec.factor) for m in rec.micro_pre)
                pre.append(StepNorms(micro_pre, sizes, _squared(rec.total_pre, 1.0)))
        return numbers, raw, pre
