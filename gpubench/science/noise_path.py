"""B_noise along a run to a quality target (issue 51, item 4): the critical batch of the whole
path to the target, from the noise scale of each stretch of one run along it.

B_noise grows as training goes on (McCandlish et al. 2018), so a window early in training
predicts a shallow target, not a deep one, and no single window stands for the path. The model
behind goodput, S = S_min (1 + B_noise/B) steps at batch B, is applied stretch by stretch: the
run's stretch i (between two evaluations) takes S_min,i (1 + B_i/B) steps at batch B, B_i being
its own B_noise, so the steps to the end of the run at any batch B are

    S(B) = sum_i S_min,i + (sum_i S_min,i B_i) / B = S_min (1 + B_path / B),
    B_path = sum_i S_min,i B_i / sum_i S_min,i,

the stretches' B_noise weighed by the fewest steps each needs. A run at batch b took n_i steps
in stretch i, so S_min,i = n_i / (1 + B_i/b) = n_i b / (b + B_i): a stretch whose |G|^2 is not
told apart from 0 (B_i unbounded) adds n_i b to the sum and nothing to the weights, so a noisy
stretch cannot make the figure explode on its own. The interval resamples the stretches
(a percentile bootstrap, seeded: the same stretches give the same interval). Pure numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpubench.science.gradient_noise import StepNorms, step_estimates

MIN_STRETCHES = 3  # the fewest stretches that give an interval
STRETCH_MEASURED = 8  # measured steps a stretch holds (science.noise_training cuts them)
RESAMPLES = 2000


@dataclass(frozen=True)
class Stretch:
    """One stretch of a run: `steps` optimizer updates, and the mean |G|^2 (`grad_sq`) and
    tr(Sigma) (`trace`) estimates over its measured steps (science.gradient_noise)."""

    steps: int
    grad_sq: float
    trace: float

    @property
    def b_noise(self) -> float:
        """tr(Sigma)/|G|^2: inf where |G|^2 <= 0 (not told from 0), 0 where tr(Sigma) <= 0."""
        if self.grad_sq <= 0:
            return math.inf
        return max(self.trace, 0.0) / self.grad_sq


def stretch_of(steps: int, measured: Sequence[StepNorms]) -> Stretch | None:
    """The stretch of `steps` updates whose `measured` steps' norms are given (those with a
    non-finite norm skipped); None where none is finite. ValueError for steps < 1."""
    if steps < 1:
        raise ValueError(f"a stretch has at least 1 step, got {steps}")
    kept = [step_estimates(s) for s in measured if s.finite()]
    if not kept:
        return None
    g2, trace = np.mean(np.asarray(kept, dtype=float), axis=0)
    return Stretch(steps, float(g2), float(trace))


def _terms(stretches: Sequence[Stretch], batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Each stretch's S_min,i B_i and S_min,i (see the module's docstring)."""
    n = np.array([s.steps for s in stretches], dtype=float)
    b = np.array([s.b_noise for s in stretches], dtype=float)
    bounded = np.isfinite(b)
    safe = np.where(bounded, b, 0.0)
    weight = np.where(bounded, n * batch / (batch + safe), 0.0)
    return np.where(bounded, weight * safe, n * batch), weight


def path_b_noise(stretches: Sequence[Stretch], batch: int) -> float:
    """B_path of a run at `batch` through `stretches` (inf where no stretch's |G|^2 is positive).
    ValueError with no stretch or a batch below 1."""
    if not stretches or batch < 1:
        raise ValueError(f"need stretches and a batch >= 1, got {len(stretches)} and {batch}")
    num, den = _terms(stretches, batch)
    return float(num.sum() / den.sum()) if den.sum() > 0 else math.inf


@dataclass(frozen=True)
class PathNoise:
    """B_path (`b_noise`) with its interval [`low`, `high`] (None with under MIN_STRETCHES
    stretches; `high` may be inf) over `stretches` stretches of `steps` updates in all."""

    b_noise: float
    low: float | None
    high: float | None
    stretches: int
    steps: int


def path_noise(
    stretches: Sequence[Stretch], batch: int, confidence: float = 0.95, seed: int = 0
) -> PathNoise:
    """B_path and a percentile-bootstrap interval at `confidence` from RESAMPLES resamples of
    the stretches (with `seed`: the same stretches give the same interval), widened where it
    does not hold B_path."""
    b_path = path_b_noise(stretches, batch)
    low = high = None
    if len(stretches) >= MIN_STRETCHES:
        num, den = _terms(stretches, batch)
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, len(stretches), size=(RESAMPLES, len(stretches)))
        nums, dens = num[picks].sum(axis=1), den[picks].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.where(dens > 0, nums / np.where(dens > 0, dens, 1.0), np.inf)
        values.sort()  # inf sorts last; a percentile by rank, not interpolated across an inf
        tail = int((1 - confidence) / 2 * RESAMPLES)
        # a percentile interval of a ratio need not hold the point figure (a skewed few
        # stretches): widened to hold it, as goodput.pick requires
        low = min(float(values[tail]), b_path)
        high = max(float(values[RESAMPLES - 1 - tail]), b_path)
    return PathNoise(b_path, low, high, len(stretches), sum(s.steps for s in stretches))
