"""Goodput: the batch predicted to reach a quality target soonest, from measured samples/s and
the gradient noise scale.

Steps to a target at batch B follow S(B) = S_min (1 + B_noise/B) (McCandlish et al. 2018,
arXiv:1812.06162, eq. 2.11, with B_crit ~ B_noise), and a step takes B / X(B) seconds at the
measured X(B) samples/s, so the time to the target is

    T(B) = S(B) B / X(B) = S_min (B + B_noise) / X(B).

S_min is common to every batch, so (B + B_noise) / X(B) ranks them; its minimum maximises
Pollux's goodput X(B) * E(B), with statistical efficiency E(B) = (B_noise + B0)/(B_noise + B)
relative to a batch B0 (Qiao et al. 2021, OSDI). The pick is the minimum over the measured
batches only (a prediction, until training runs confirm it); it holds across B_noise's interval
when the interval's two ends pick the same batch. Where convergence runs measured steps to the
target, `fit_critical_batch` fits S = S_min (1 + B_crit/B) to them, B_crit to state beside
B_noise. Pure functions, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


def relative_time(batch: float, samples_per_s: float, b_noise: float) -> float:
    """Predicted time to target over S_min, in seconds: (batch + b_noise) / samples_per_s; as
    b_noise -> inf the ranking tends to 1/samples_per_s's (the throughput-fastest batch)."""
    if not (batch > 0 and samples_per_s > 0 and math.isfinite(samples_per_s)):
        raise ValueError(f"need a positive batch and samples/s, got {batch} and {samples_per_s}")
    if not b_noise >= 0:
        raise ValueError(f"b_noise must be >= 0, got {b_noise}")
    return (batch + b_noise) / samples_per_s


def _fastest(samples_per_s: Mapping[int, float], b_noise: float) -> int:
    """The batch of least predicted time; ties go to the smaller batch, and an infinite
    b_noise ranks by samples/s alone (the limit of the predicted times' ratios)."""
    if math.isinf(b_noise):
        return min(samples_per_s, key=lambda b: (-samples_per_s[b], b))
    return min(samples_per_s, key=lambda b: (relative_time(b, samples_per_s[b], b_noise), b))


@dataclass(frozen=True)
class GoodputPick:
    """The batch predicted soonest to the target (`batch`), the throughput-fastest batch
    (`throughput_batch`, most samples/s) and `gain` = T(throughput_batch) / T(batch) >= 1 (how
    many times longer the throughput answer takes to the target); `times`: each measured
    batch's predicted time over S_min (seconds); `low_batch` and `high_batch`: the picks at
    B_noise's interval ends (None without an interval); `holds`: both ends pick `batch`
    (None without an interval)."""

    batch: int
    throughput_batch: int
    gain: float
    b_noise: float
    times: dict[int, float]
    low_batch: int | None
    high_batch: int | None

    @property
    def holds(self) -> bool | None:
        if self.low_batch is None or self.high_batch is None:
            return None
        return self.low_batch == self.batch == self.high_batch


def pick(
    samples_per_s: Mapping[int, float],
    b_noise: float,
    low: float | None = None,
    high: float | None = None,
) -> GoodputPick:
    """The goodput pick over the measured batches (`samples_per_s`: batch -> measured samples/s)
    at `b_noise`, and the picks at the interval's ends `low` <= b_noise <= `high` (`high` may be
    inf). Raises ValueError on no batches, a non-positive or non-finite rate, a negative or
    non-finite b_noise, or an interval that does not hold it."""
    if not samples_per_s:
        raise ValueError("no measured batch to pick from")
    if not (math.isfinite(b_noise) and b_noise >= 0):
        raise ValueError(f"b_noise must be finite and >= 0, got {b_noise}")
    if (low is None) != (high is None):
        raise ValueError("give both ends of the interval or neither")
    if low is not None and high is not None and not 0 <= low <= b_noise <= high:
        raise ValueError(f"the interval [{low}, {high}] does not hold b_noise = {b_noise}")
    times = {b: relative_time(b, x, b_noise) for b, x in sorted(samples_per_s.items())}
    best = _fastest(samples_per_s, b_noise)
    top = min(samples_per_s, key=lambda b: (-samples_per_s[b], b))
    return GoodputPick(
        batch=best,
        throughput_batch=top,
        gain=times[top] / times[best],
        b_noise=b_noise,
        times=times,
        low_batch=None if low is None else _fastest(samples_per_s, low),
        high_batch=None if high is None else _fastest(samples_per_s, high),
    )


@dataclass(frozen=True)
class CriticalBatchFit:
    """S = s_min (1 + b_crit / B) fitted to steps-to-target rows: `b_crit` (None where the fit
    gives s_min <= 0 or b_crit < 0: the rows do not follow the model), `s_min` (steps), the fit's
    quality as `r2` (of the weighted fit, on S) and `rel_rmse` (root mean square relative
    residual), `rows` and distinct `batches` fitted."""

    s_min: float
    b_crit: float | None
    r2: float
    rel_rmse: float
    rows: int
    batches: int


def fit_critical_batch(rows: Sequence[tuple[float, float]]) -> CriticalBatchFit:
    """Least squares of S = s_min + (s_min b_crit) (1/B) on (batch, steps_to_target) rows (seeds
    may repeat a batch), each residual relative to its S (steps to target scatter in proportion
    to their size between seeds, and S spans orders of magnitude across batches). Raises
    ValueError with fewer than 3 distinct batches or a non-positive or non-finite value."""
    data = np.asarray(rows, dtype=float).reshape(-1, 2)
    if not np.all(np.isfinite(data)) or np.any(data <= 0):
        raise ValueError("batches and steps to target must be positive and finite")
    batches = len(np.unique(data[:, 0]))
    if batches < 3:
        raise ValueError(f"need >= 3 distinct batches to fit and judge the fit, got {batches}")
    inv_b, s = 1 / data[:, 0], data[:, 1]
    design = np.column_stack([np.ones_like(inv_b), inv_b]) / s[:, None]
    (s_min, slope), *_ = np.linalg.lstsq(design, np.ones_like(s), rcond=None)
    fitted = s_min + slope * inv_b
    rel = (s - fitted) / s
    r2 = 1 - float(np.sum((s - fitted) ** 2)) / float(np.sum((s - s.mean()) ** 2) or math.inf)
    b_crit = float(slope / s_min) if s_min > 0 and slope >= 0 else None
    return CriticalBatchFit(
        s_min=float(s_min),
        b_crit=b_crit,
        r2=r2,
        rel_rmse=float(np.sqrt(np.mean(rel**2))),
        rows=len(s),
        batches=batches,
    )
