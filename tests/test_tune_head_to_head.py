"""Issue 42, item 6 (the package's half): tune's pick judged head to head against the grid's
from interleaved rounds, on synthetic rounds: accepted where tune/grid's 95% interval reaches
1 - margin, or the two picks are one configuration; the noise floor quoted beside it."""

from __future__ import annotations

import numpy as np
import pytest
from acceptance import head_to_head


def _rounds(ratio: float, spread: float, n: int = 12, seed: int = 0) -> tuple[list[float], ...]:
    """Paired rounds: the grid's pick at 1,000 samples/s with a round's machine drift shared by
    both, tune's at `ratio` of it with its own spread."""
    rng = np.random.default_rng(seed)
    drift = np.exp(rng.normal(0, 0.10, n))  # the machine: both picks feel it
    grid = 1000.0 * drift * np.exp(rng.normal(0, spread, n))
    tune = 1000.0 * ratio * drift * np.exp(rng.normal(0, spread, n))
    return list(tune), list(grid)


def test_a_pick_within_the_margin_is_accepted() -> None:
    tune, grid = _rounds(0.99, 0.01)
    h = head_to_head(tune, grid, floor=0.58)
    assert h.accepted and h.low < 0.99 < h.high
    assert h.line().startswith("tune/grid x0.9")
    assert h.line().endswith(
        "accepted at the 3% margin; grid against grid agreed 58% of the time (the noise floor)"
    )


def test_a_pick_slower_by_more_than_the_margin_is_not() -> None:
    tune, grid = _rounds(0.90, 0.01)
    h = head_to_head(tune, grid)
    assert not h.accepted and h.high < 0.97
    assert "NOT accepted" in h.line()


def test_the_shared_drift_of_a_round_cancels_in_the_pairing() -> None:
    # 10% drift between rounds, 1% within: unpaired intervals would overlap; paired ones not
    tune, grid = _rounds(0.90, 0.01, seed=3)
    assert min(tune) < max(grid) * 0.97  # the raw figures overlap
    assert not head_to_head(tune, grid).accepted


def test_the_same_configuration_is_accepted_and_bad_rounds_refused() -> None:
    tune, grid = _rounds(1.0, 0.01)
    assert head_to_head(tune, grid, same=True).line().startswith("the same configuration")
    with pytest.raises(ValueError, match="paired rounds"):
        head_to_head(tune[:3], grid[:3])
    with pytest.raises(ValueError, match="finite and positive"):
        head_to_head([0.0, *tune[1:]], grid)
