"""Goodput's pick and the B_crit fit, against the noisy quadratic model of Zhang et al. 2019
("Which Algorithmic Choices Matter at Which Batch Sizes?", NeurIPS): SGD on a diagonal quadratic
with gradient noise, whose expected loss has a closed form (numpy, milliseconds)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpubench.science.goodput import fit_critical_batch, pick, relative_time

GRID = [2**i for i in range(15)]  # batches 1 .. 16384


def _nqm_steps(h: np.ndarray, c: np.ndarray, target: float, batch: int) -> int:
    """Fewest SGD steps at `batch` until the expected loss 0.5 sum h_i E[theta_i^2] meets
    `target`, over a grid of learning rates (Zhang et al. tune it per batch). Per coordinate,
    theta <- (1 - a h) theta + a noise (variance c/batch), so from theta_0 = 1:
    E[theta^2]_t = r^t (1 - v) + v with r = (1 - a h)^2 and v = a c / (batch h (2 - a h))."""
    best = math.inf
    for a in np.geomspace(1e-3, 1 / h.max(), 40):
        r, v = (1 - a * h) ** 2, a * c / (batch * h * (2 - a * h))

        def loss(t: int, r: np.ndarray = r, v: np.ndarray = v) -> float:
            return float(0.5 * np.sum(h * (r**t * (1 - v) + v)))

        if float(0.5 * np.sum(h * v)) >= target:
            continue  # the noise floor lies above the target at this rate
        lo, hi = 0, 1
        while loss(hi) > target:
            lo, hi = hi, 2 * hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if loss(mid) <= target else (mid, hi)
        best = min(best, hi)
    return int(best)


def _nqm_noise_scale(h: np.ndarray, c: np.ndarray, target: float) -> float:
    """tr(Sigma)/|G|^2 (Sigma = diag(c), G = h theta) halfway along noise-free gradient descent
    (rate 1/max h) from theta = 1 to the target: where a short run toward the target measures
    it, since B_noise grows as |G| shrinks."""
    theta, path = np.ones_like(h), []
    while 0.5 * np.sum(h * theta**2) > target:
        path.append(float(np.sum(c) / np.sum((h * theta) ** 2)))
        theta = theta * (1 - h / h.max())
    return path[len(path) // 2]


@pytest.mark.parametrize(("spread", "target_fraction"), [(0.1, 0.02), (0.01, 0.1), (0.01, 0.02)])
@pytest.mark.parametrize("knee", [4, 32, 256, 2048])
def test_goodput_pick_is_within_one_grid_step_of_the_nqms_fastest(
    spread: float, target_fraction: float, knee: int
) -> None:
    h = np.geomspace(1.0, spread, 100)  # curvatures
    c = 30.0 * h  # per-sample gradient noise variance along each curvature
    target = target_fraction * 0.5 * float(np.sum(h))
    steps = {b: _nqm_steps(h, c, target, b) for b in GRID}
    # a step takes a + b B seconds: samples/s B / (a + b B) saturates past B = knee = a/b
    rate = {b: b / (1.0 + b / knee) for b in GRID}
    true_time = {b: steps[b] * b / rate[b] for b in GRID}
    fastest = min(GRID, key=lambda b: (true_time[b], b))
    got = pick(rate, _nqm_noise_scale(h, c, target))
    assert got.throughput_batch == GRID[-1] != fastest  # throughput alone answers wrong
    assert 0.5 <= got.batch / fastest <= 2
    assert got.gain > 1


def test_pick_minimises_predicted_time_and_maximises_goodput() -> None:
    rate = {8: 1000.0, 32: 3000.0, 128: 6000.0, 512: 7000.0}
    got = pick(rate, 50.0, low=30.0, high=90.0)
    times = {b: (b + 50.0) / x for b, x in rate.items()}
    assert got.times == pytest.approx(times)
    assert got.batch == 32 and got.throughput_batch == 512  # (32+50)/3000 < (128+50)/6000
    assert got.gain == pytest.approx(times[512] / times[32])
    # statistical efficiency against B=8 (McCandlish; Pollux): (B_noise + 8) / (B_noise + B)
    goodput = {b: x * (50.0 + 8) / (50.0 + b) for b, x in rate.items()}
    assert max(goodput, key=goodput.__getitem__) == got.batch
    assert (got.low_batch, got.high_batch, got.holds) == (32, 128, False)
    assert pick(rate, 50.0, low=40.0, high=60.0).holds is True
    assert pick(rate, 50.0).holds is None
    # a noise scale not told apart from infinity picks by samples/s at that end
    assert pick(rate, 50.0, low=40.0, high=math.inf).high_batch == 512


def test_pick_refuses_what_it_cannot_rank() -> None:
    with pytest.raises(ValueError, match="no measured batch"):
        pick({}, 10.0)
    with pytest.raises(ValueError, match="does not hold"):
        pick({8: 1.0, 16: 2.0}, 10.0, low=20.0, high=30.0)
    with pytest.raises(ValueError, match="positive batch"):
        relative_time(8, 0.0, 1.0)
    with pytest.raises(ValueError, match="finite"):
        pick({8: 1.0}, math.nan)


def test_fit_recovers_a_known_critical_batch() -> None:
    rng = np.random.default_rng(0)
    s_min, b_crit = 300.0, 45.0
    rows = [
        (b, s_min * (1 + b_crit / b) * math.exp(0.05 * rng.standard_normal()))
        for b in (8, 16, 32, 64, 128, 256, 512)
        for _ in range(3)  # seeds
    ]
    fit = fit_critical_batch(rows)
    assert fit.b_crit == pytest.approx(b_crit, rel=0.15)
    assert fit.s_min == pytest.approx(s_min, rel=0.1)
    assert fit.r2 > 0.95 and fit.rel_rmse < 0.1
    assert (fit.rows, fit.batches) == (21, 7)
    exact = fit_critical_batch([(b, s_min * (1 + b_crit / b)) for b in (8, 64, 512)])
    assert exact.b_crit == pytest.approx(b_crit) and exact.rel_rmse == pytest.approx(0, abs=1e-9)


def test_fit_says_when_rows_do_not_follow_the_model() -> None:
    rising = [(8, 100.0), (64, 200.0), (512, 400.0)]  # more steps at larger batches
    assert fit_critical_batch(rising).b_crit is None
    noisy = fit_critical_batch([(8, 100.0), (16, 300.0), (32, 90.0), (64, 250.0)])
    assert noisy.rel_rmse > 0.3
    with pytest.raises(ValueError, match=">= 3 distinct"):
        fit_critical_batch([(8, 100.0), (8, 110.0), (64, 50.0)])
    with pytest.raises(ValueError, match="positive"):
        fit_critical_batch([(8, 100.0), (16, -1.0), (64, 50.0)])
