"""The gradient noise scale of McCandlish et al. (2018), "An Empirical Model of Large-Batch
Training" (arXiv:1812.06162): B_simple = tr(Sigma) / |G|^2.

G is the true gradient and Sigma the covariance of per-sample gradients. The squared norm of a
gradient averaged over B samples has expectation |G|^2 + tr(Sigma)/B, so squared norms at two
batch sizes B_small < B_big give unbiased estimates of both (their Appendix A.1):

    |G|^2     ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
    tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1/B_small - 1/B_big)

Each estimate is noisy, so B_simple is the ratio of their exponential moving averages. Batch
sizes count samples (sequences for a language model); the result is in the same unit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn


def two_batch_estimates(
    sq_small: float, b_small: float, sq_big: float, b_big: float
) -> tuple[float, float]:
    """Unbiased estimates (|G|^2, tr(Sigma)) from squared gradient norms |G_small|^2 and
    |G_big|^2 measured at batch sizes b_small < b_big."""
    if not 0 < b_small < b_big:
        raise ValueError(f"need 0 < b_small < b_big, got {b_small} and {b_big}")
    g2 = (b_big * sq_big - b_small * sq_small) / (b_big - b_small)
    trace = (sq_small - sq_big) / (1 / b_small - 1 / b_big)
    return g2, trace


@dataclass
class NoiseScale:
    """Exponential moving averages (decay `decay`, bias-corrected) of the two estimates."""

    decay: float = 0.9
    _g2: float = 0.0
    _trace: float = 0.0
    updates: int = 0

    def update(self, sq_small: float, b_small: float, sq_big: float, b_big: float) -> None:
        g2, trace = two_batch_estimates(sq_small, b_small, sq_big, b_big)
        self._g2 = self.decay * self._g2 + (1 - self.decay) * g2
        self._trace = self.decay * self._trace + (1 - self.decay) * trace
        self.updates += 1

    def _corrected(self, value: float) -> float | None:
        return None if self.updates == 0 else value / (1 - self.decay**self.updates)

    @property
    def grad_sq_norm(self) -> float | None:
        """The averaged estimate of |G|^2 (None before the first update)."""
        return self._corrected(self._g2)

    @property
    def trace_sigma(self) -> float | None:
        """The averaged estimate of tr(Sigma), per sample (None before the first update)."""
        return self._corrected(self._trace)

    @property
    def b_simple(self) -> float | None:
        """tr(Sigma)/|G|^2 in samples; None before the first update or while the estimate of
        |G|^2 is not positive (the noise still swamps the signal)."""
        g2, trace = self.grad_sq_norm, self.trace_sigma
        if g2 is None or trace is None or g2 <= 0:
            return None
        return trace / g2


def gradient_norms(
    model: nn.Module,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    inputs: Tensor,
    targets: Tensor,
    splits: int,
) -> tuple[float, int, float, int]:
    """Squared gradient norms at two batch sizes from one batch: the batch is cut into `splits`
    equal parts of b samples (a remainder is dropped); returns (mean over parts of |g_part|^2, b,
    |mean of g_part|^2, splits * b). Computed in fp32 in training mode without touching the
    parameters' .grad or the model's buffers (BatchNorm statistics are restored)."""
    b = len(inputs) // splits
    if b < 1:
        raise ValueError(f"{len(inputs)} samples cannot be cut into {splits} parts")
    params = [p for p in model.parameters() if p.requires_grad]
    buffers = [t.detach().clone() for t in model.buffers()]
    was_training = model.training
    model.train()
    total = [torch.zeros_like(p, dtype=torch.float32) for p in params]
    sq_small = 0.0
    try:
        for i in range(splits):
            part = slice(i * b, (i + 1) * b)
            loss = loss_fn(model(inputs[part]), targets[part]).float()
            grads = torch.autograd.grad(loss, params)
            sq_small += float(sum(g.float().pow(2).sum() for g in grads))  # type: ignore[arg-type]
            for acc, g in zip(total, grads, strict=True):
                acc.add_(g.float())
    finally:
        with torch.no_grad():
            for t, saved in zip(model.buffers(), buffers, strict=True):
                t.copy_(saved)
        model.train(was_training)
    sq_big = float(sum((acc / splits).pow(2).sum() for acc in total))  # type: ignore[arg-type]
    return sq_small / splits, b, sq_big, splits * b
