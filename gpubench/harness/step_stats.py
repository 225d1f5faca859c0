"""The statistics of raw step times: the median, its spread and the distribution-free confidence
interval of the median from order statistics. Pure functions of numbers (no torch), so that the
verdict's statistics (science.leaders) and the console read them without the timing machinery."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import bdtr  # not scipy.stats: 0.5-1.4 s to import in every worker

__all__ = ["Stats", "median_ci_indices", "min_samples_for_ci"]


@dataclass(frozen=True)
class Stats:
    """Summary of raw step times (seconds). `ci_rel` is the half-width of the 95% confidence
    interval of the median (distribution-free, from order statistics) over the median."""

    n: int
    median_s: float
    mean_s: float
    iqr_s: float
    p90_s: float
    cv: float
    ci_rel: float

    def noisy(self, target_rel_ci: float) -> bool:
        """Whether the median's interval is wider than `target_rel_ci`, whatever stopped the
        measurement: no interval at all (too few steps) is noisy too."""
        return not math.isfinite(self.ci_rel) or self.ci_rel > target_rel_ci

    def columns(self) -> dict[str, float]:
        """The row's step-time columns: the count and the statistics (seconds)."""
        return dict(
            steps_measured=self.n,
            step_time_s=self.median_s,
            step_time_mean_s=self.mean_s,
            step_time_iqr_s=self.iqr_s,
            step_time_p90_s=self.p90_s,
            step_time_cv=self.cv,
            step_time_ci_rel=self.ci_rel,
        )

    @staticmethod
    def of(times: list[float]) -> Stats:
        if not times:
            raise ValueError("no step times to summarise")
        x = np.sort(np.asarray(times, dtype=float))
        n = len(x)
        median = float(np.median(x))
        q1, q3, p90 = (float(v) for v in np.percentile(x, [25, 75, 90]))
        mean = float(x.mean())
        cv = float(x.std(ddof=1) / mean) if n > 1 and mean > 0 else math.inf
        # the order statistics the exact binomial gives; no interval below 6 samples (infinite)
        ranks = median_ci_indices(n)
        ci = math.inf if ranks is None or median <= 0 else (x[ranks[1]] - x[ranks[0]]) / 2 / median
        return Stats(n, median, mean, q3 - q1, p90, cv, float(ci))


@functools.lru_cache(maxsize=4096)
def median_ci_indices(n: int, confidence: float = 0.95) -> tuple[int, int] | None:
    """0-based indices (lo, hi) into n sorted samples such that [x_lo, x_hi] covers the median
    with probability >= `confidence` for any continuous distribution, as narrow as the exact
    Binomial(n, 1/2) allows; None when n is too small for any such pair."""
    tail = (1 - confidence) / 2
    # j: the fewest samples below the true median whose probability exceeds the tail, B ~
    # Binomial(n, 1/2); coverage of [x_(j), x_(n-j+1)] (1-based) is 1 - 2 P(B <= j - 1).
    # j is the least k with P(B <= k) > tail (bdtr: the binomial's cdf), found by bisection.
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if bdtr(mid, n, 0.5) > tail:
            hi = mid
        else:
            lo = mid + 1
    j = lo
    return None if j == 0 else (j - 1, n - j)


def min_samples_for_ci(confidence: float = 0.95) -> int:
    """The fewest step times for which the median has a confidence interval (6 at 95%)."""
    n = 1
    while median_ci_indices(n, confidence) is None:
        n += 1
    return n
