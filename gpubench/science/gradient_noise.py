"""The gradient noise scale B_noise = tr(Sigma)/|G|^2 from norms the training already computes.

G is the true gradient and Sigma the covariance of one sample's gradient. A step that accumulates
k >= 2 micro-batches (or ranks) already holds two batch sizes: each micro-batch's gradient g_i
(b_i samples) and their accumulated gradient g (B samples). For a gradient averaged over b
samples, E|g_b|^2 = |G|^2 + tr(Sigma)/b, so the mean of the micro-batches' squared norms and the
accumulated gradient's squared norm give unbiased estimates of both |G|^2 and tr(Sigma)
(McCandlish et al. 2018, "An Empirical Model of Large-Batch Training", arXiv:1812.06162,
appendix A.1, with B_small = b and B_big = B; AdaptDL's GradientNoiseScale applies the same to
accumulation steps and replicas). No extra forward or backward pass.

One step's estimates are noisy (|G|^2's can be negative), so B_noise is the ratio of the two
estimates' averages over a run, never an average of ratios: their plain means over the run, or
bias-corrected exponential moving averages (which follow B_noise as it grows during training).
The interval comes from batch means: the run's steps cut into consecutive batches, Fieller's
interval for the ratio of the two means. Across seeds, `across_seeds` gives one from the seeds'
values instead. A step with a non-finite norm (an fp16 overflow, a diverged step) is skipped and
counted.

Under Adam and AdamW the step is taken along g / (sqrt(v_hat) + eps), so the noise that matters
is the preconditioned gradient's (AdaptDL's AdamGradientNoiseScale): the same estimator on
squared norms of every gradient divided elementwise by the preconditioner (taken in the step by
science.gradient_norms). Batch sizes count samples; B_noise is in the same unit. Pure numpy, no
torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

# AdaptDL preconditions only from the optimizer's 5th step: v_hat from fewer steps is a few
# squared gradients, not a second-moment estimate.
PRECONDITION_FROM_STEP = 5


@dataclass(frozen=True)
class StepNorms:
    """One optimizer step's squared gradient norms.

    `micro_sq[i]`: |g_i|^2 of micro-batch i's mean-loss gradient (over `micro_samples[i]`
    samples; every micro-batch of every rank is one entry); `total_sq`: |g|^2 of the step's
    accumulated gradient, sum_i w_i g_i with `weights` w_i (default: b_i / B, the whole batch's
    mean loss; the harness's equal micro-batches each weigh 1/k, which is the same)."""

    micro_sq: tuple[float, ...]
    micro_samples: tuple[int, ...]
    total_sq: float
    weights: tuple[float, ...] | None = None

    def finite(self) -> bool:
        """Whether every norm is finite (a step with an inf or NaN is skipped)."""
        return math.isfinite(self.total_sq) and all(math.isfinite(s) for s in self.micro_sq)


def step_estimates(step: StepNorms) -> tuple[float, float]:
    """Unbiased estimates (|G|^2, tr(Sigma)) from one step's norms, Sigma per sample.

    With S = mean_i |g_i|^2 and T = |g|^2: E S = |G|^2 + tr(Sigma) mean_i(1/b_i) and
    E T = |G|^2 + tr(Sigma) sum_i w_i^2/b_i; solving the two gives the estimates (for k equal
    micro-batches of b: McCandlish's B_small = b, B_big = k b). Raises ValueError for fewer than
    two micro-batches, a non-positive size, weights that do not sum to 1, or a non-finite norm."""
    k = len(step.micro_sq)
    if k < 2 or len(step.micro_samples) != k:
        raise ValueError(
            f"need >= 2 micro-batches with a size each, got {k} norms and "
            f"{len(step.micro_samples)} sizes"
        )
    if min(step.micro_samples) <= 0:
        raise ValueError(f"micro-batch sizes must be positive, got {step.micro_samples}")
    if not step.finite():
        raise ValueError("a non-finite norm has no estimate (skip the step)")
    b = np.asarray(step.micro_samples, dtype=float)
    w = b / b.sum() if step.weights is None else np.asarray(step.weights, dtype=float)
    if w.shape != b.shape or not math.isclose(float(w.sum()), 1.0, rel_tol=1e-9):
        raise ValueError(f"weights must be one per micro-batch and sum to 1, got {step.weights}")
    small = float(np.mean(1 / b))  # the micro-batches' noise factor
    big = float(np.sum(w**2 / b))  # the accumulated gradient's
    if not small > big:
        raise ValueError("the accumulated gradient is no less noisy than its micro-batches")
    s = float(np.mean(step.micro_sq))
    trace = (s - step.total_sq) / (small - big)
    return step.total_sq - trace * big, trace


@dataclass(frozen=True)
class NoiseScale:
    """B_noise over a run: `b_noise` = trace_sigma / grad_sq (None where grad_sq <= 0: the noise
    still swamps the signal), its interval [`low`, `high`] (`high` may be inf where |G|^2 is not
    told apart from 0; None with too few steps) and what the interval is from (`interval_from`),
    `steps` used, `skipped` (non-finite norms) and `average` ("mean" or "ema")."""

    b_noise: float | None
    grad_sq: float
    trace_sigma: float
    low: float | None
    high: float | None
    interval_from: str
    steps: int
    skipped: int
    average: str


def _t_quantile(confidence: float, dof: int) -> float:
    from scipy.special import stdtrit  # scipy.special, not scipy.stats: a fraction of the import

    return float(stdtrit(dof, 0.5 + confidence / 2))


def fieller(
    num: Sequence[float], den: Sequence[float], confidence: float = 0.95
) -> tuple[float, float]:
    """Fieller's interval for mean(num)/mean(den) from paired observations (batch means),
    clipped to [0, inf): (0, inf) where mean(den) is not told apart from 0 at `confidence`.
    Needs at least 3 pairs."""
    n = len(num)
    if n < 3 or len(den) != n:
        raise ValueError(f"need >= 3 paired batch means, got {n} and {len(den)}")
    x, y = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    mx, my = float(x.mean()), float(y.mean())
    cov = np.cov(x, y) / n  # the covariance of the two means
    q2 = _t_quantile(confidence, n - 1) ** 2
    # (mx - r my)^2 <= q2 (vxx - 2 r vxy + r^2 vyy): a r^2 + b r + c <= 0
    a = my * my - q2 * cov[1, 1]
    b = -2 * (mx * my - q2 * cov[0, 1])
    c = mx * mx - q2 * cov[0, 0]
    if a <= 0:
        return 0.0, math.inf
    disc = max(b * b - 4 * a * c, 0.0)
    lo, hi = (-b - math.sqrt(disc)) / (2 * a), (-b + math.sqrt(disc)) / (2 * a)
    return max(lo, 0.0), max(hi, 0.0)


def noise_scale(
    steps: Sequence[StepNorms],
    average: Literal["mean", "ema"] = "mean",
    decay: float = 0.95,
    batches: int = 10,
    confidence: float = 0.95,
) -> NoiseScale:
    """B_noise from a run's steps, in order: the ratio of the averaged tr(Sigma) and |G|^2
    estimates, averaged as plain means ("mean") or bias-corrected exponential moving averages
    with per-step `decay` ("ema": the end of the run weighs most). Steps with a non-finite norm
    are skipped and counted. The interval (at `confidence`) is Fieller's for the ratio of the
    means over `batches` consecutive batches of the finite steps (the run's mean, whichever
    `average`); None with fewer than 3 steps a batch. Raises ValueError with no finite step."""
    if not 0 < decay < 1:
        raise ValueError(f"decay must be in (0, 1), got {decay}")
    if average not in ("mean", "ema"):
        raise ValueError(f"average must be 'mean' or 'ema', got {average!r}")
    kept = [s for s in steps if s.finite()]
    if not kept:
        raise ValueError(f"no finite step among {len(steps)}")
    est = np.array([step_estimates(s) for s in kept])  # (steps, 2): |G|^2, tr(Sigma)
    if average == "mean":
        g2, trace = est.mean(axis=0)
    else:
        w = decay ** np.arange(len(est))[::-1]  # the latest step weighs 1
        g2, trace = (w @ est) / w.sum()  # the bias-corrected EMA
    n = min(batches, len(est) // 3)
    low = high = None
    if n >= 3:
        parts = np.array_split(est, n)
        g_means = [float(p[:, 0].mean()) for p in parts]
        t_means = [float(p[:, 1].mean()) for p in parts]
        low, high = fieller(t_means, g_means, confidence)
    return NoiseScale(
        b_noise=float(trace / g2) if g2 > 0 else None,
        grad_sq=float(g2),
        trace_sigma=float(trace),
        low=low,
        high=high,
        interval_from=f"{n} batch means over {len(est)} steps" if n >= 3 else "too few steps",
        steps=len(est),
        skipped=len(steps) - len(kept),
        average=average,
    )


def across_seeds(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(centre, low, high) of B_noise over seeds' values: the geometric mean and the Student-t
    interval of log B_noise (B_noise is a positive scale), so at least 2 positive finite values."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2 or not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise ValueError(f"need >= 2 positive finite values, got {list(values)}")
    logs = np.log(v)
    half = _t_quantile(confidence, len(v) - 1) * float(logs.std(ddof=1)) / math.sqrt(len(v))
    centre = float(logs.mean())
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)
