"""The median's interval from order statistics (harness.step_stats.median_ci_indices) against a
reference that walks the exact Binomial(n, 1/2) by hand: the same indices for every n from 1 to
200 at 95% and 99%, so moving to scipy changed no interval."""

from __future__ import annotations

import math

import pytest

from gpubench.harness.step_stats import median_ci_indices, min_samples_for_ci


def _reference(n: int, confidence: float) -> tuple[int, int] | None:
    """The hand-written walk the package used before scipy: the most order statistics j below
    the median with P(B <= j - 1) <= (1 - confidence) / 2, B ~ Binomial(n, 1/2)."""
    tail = (1 - confidence) / 2
    log_norm = math.lgamma(n + 1) + n * math.log(0.5)
    below = 0.0
    j = 0
    while j <= n // 2:
        p = math.exp(log_norm - math.lgamma(j + 1) - math.lgamma(n - j + 1))
        if below + p > tail:
            break
        below += p
        j += 1
    return None if j == 0 else (j - 1, n - j)


@pytest.mark.parametrize("confidence", [0.95, 0.99])
def test_the_same_indices_as_the_hand_written_binomial_for_n_up_to_200(confidence: float) -> None:
    for n in range(1, 201):
        assert median_ci_indices(n, confidence) == _reference(n, confidence), n


def test_fixed_points_of_the_table() -> None:
    # Conover's table of the median's interval (95%): n = 6 is the first with one.
    assert min_samples_for_ci(0.95) == 6
    assert min_samples_for_ci(0.99) == 8
    assert median_ci_indices(7, 0.99) is None
    assert median_ci_indices(8, 0.99) == (0, 7)
    assert median_ci_indices(200, 0.95) == (85, 114)
