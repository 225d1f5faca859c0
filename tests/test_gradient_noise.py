"""The gradient noise scale from micro-batch norms, on synthetic gradients with a known
tr(Sigma)/|G|^2 (numpy only: no model, no torch)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from gpubench.science.gradient_noise import (
    StepNorms,
    across_seeds,
    fieller,
    noise_scale,
    step_estimates,
)

D = 40
TRUE_G = np.full(D, 1 / math.sqrt(D))  # |G|^2 = 1
SIGMA = np.linspace(0.2, 1.6, D)  # per-sample noise std per coordinate (a diagonal Sigma)
TRUE_B = float(np.sum(SIGMA**2))  # tr(Sigma) / |G|^2 with |G|^2 = 1: about 37
# micro-batch layouts: equal (k micro-batches of b) and unequal sizes
LAYOUTS = [(32, 32), (16, 16, 16, 16), (8,) * 8, (4,) * 16, (8, 24, 32)]


def _steps(
    layout: tuple[int, ...], n: int, seed: int, scale: np.ndarray | None = None
) -> list[StepNorms]:
    """`n` steps whose per-sample gradients are G + noise (covariance diag(SIGMA^2)), averaged
    per micro-batch of `layout` and accumulated over the batch, all divided by `scale` (a fixed
    preconditioner) before taking norms."""
    rng = np.random.default_rng(seed)
    p = np.ones(D) if scale is None else scale
    samples = TRUE_G + SIGMA * rng.standard_normal((n, sum(layout), D))
    cuts = np.cumsum((0, *layout))
    micro = np.stack([samples[:, a:b].mean(axis=1) for a, b in itertools.pairwise(cuts)], axis=1)
    total = samples.mean(axis=1)  # the sample-weighted mean of the micro-batches' means
    micro_sq = np.sum((micro / p) ** 2, axis=2)
    total_sq = np.sum((total / p) ** 2, axis=1)
    return [
        StepNorms(tuple(map(float, m)), layout, float(t))
        for m, t in zip(micro_sq, total_sq, strict=True)
    ]


def test_one_step_inverts_the_expected_squared_norms() -> None:
    g2, trace, layout = 2.0, 60.0, (4, 4, 8)
    expected = tuple(g2 + trace / b for b in layout)  # E|g_b|^2 = |G|^2 + tr(Sigma)/b
    step = StepNorms(expected, layout, g2 + trace / sum(layout))
    assert step_estimates(step) == pytest.approx((g2, trace))
    # equal weights 1/k on unequal micro-batches: the accumulated gradient's noise is
    # tr(Sigma) sum w^2/b, not tr(Sigma)/B
    w = (1 / 3,) * 3
    step = StepNorms(
        expected, layout, g2 + trace * sum(x * x / b for x, b in zip(w, layout, strict=True)), w
    )
    assert step_estimates(step) == pytest.approx((g2, trace))


def test_one_step_refuses_what_cannot_separate_noise_from_signal() -> None:
    with pytest.raises(ValueError, match=">= 2 micro-batches"):
        step_estimates(StepNorms((1.0,), (8,), 1.0))
    with pytest.raises(ValueError, match="non-finite"):
        step_estimates(StepNorms((1.0, math.nan), (8, 8), 1.0))
    with pytest.raises(ValueError, match="sum to 1"):
        step_estimates(StepNorms((1.0, 2.0), (8, 8), 1.0, (0.5, 0.6)))


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: "x".join(map(str, x)))
@pytest.mark.parametrize("average", ["mean", "ema"])
def test_raw_noise_scale_is_within_10_percent_of_the_truth(
    layout: tuple[int, ...], average: str
) -> None:
    est = noise_scale(_steps(layout, 600, seed=len(layout)), average, decay=0.995)  # type: ignore[arg-type]
    assert est.b_noise == pytest.approx(TRUE_B, rel=0.1)
    assert est.grad_sq == pytest.approx(1.0, rel=0.1)
    assert est.steps == 600 and est.skipped == 0 and est.average == average
    assert est.low is not None and est.high is not None
    assert est.low < est.b_noise < est.high  # the interval holds its own estimate
    assert est.high - est.low < TRUE_B  # and says something


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: "x".join(map(str, x)))
def test_preconditioned_noise_scale_is_within_10_percent_of_the_truth(
    layout: tuple[int, ...],
) -> None:
    # Adam's v ~ E g^2 per coordinate, so the preconditioner reweighs the noisy coordinates
    v = TRUE_G**2 + SIGMA**2
    p = np.sqrt(v) + 1e-8  # Adam's sqrt(v_hat) + eps (science.gradient_norms)
    truth = float(np.sum((SIGMA / p) ** 2) / np.sum((TRUE_G / p) ** 2))
    assert abs(truth / TRUE_B - 1) > 0.3  # preconditioning changes the answer here
    est = noise_scale(_steps(layout, 600, seed=10 + len(layout), scale=p))
    assert est.b_noise == pytest.approx(truth, rel=0.1)


def test_the_interval_covers_the_truth_about_as_often_as_it_says() -> None:
    held = sum(
        (e := noise_scale(_steps((16, 16, 16, 16), 150, seed=100 + i))).low is not None
        and e.high is not None
        and e.low <= TRUE_B <= e.high
        for i in range(40)
    )
    assert 32 <= held <= 40  # 95% nominal: 38 expected, binomial spread


def test_non_finite_norms_are_skipped_and_counted() -> None:
    steps = _steps((8,) * 8, 200, seed=3)
    spoiled = list(steps)
    spoiled.insert(10, StepNorms((math.inf,) * 8, (8,) * 8, 1.0))
    spoiled.insert(50, StepNorms((1.0,) * 8, (8,) * 8, math.nan))
    est = noise_scale(spoiled)
    assert est.skipped == 2 and est.steps == 200
    assert est.b_noise == pytest.approx(noise_scale(steps).b_noise)
    with pytest.raises(ValueError, match="no finite step"):
        noise_scale(spoiled[10:11])


def test_ema_follows_a_noise_scale_that_grows() -> None:
    # |G|^2 shrinks 4x halfway (as it does during training): B_noise grows 4x
    early = _steps((16,) * 4, 300, seed=5)
    # the late half's per-sample gradients are G/2 + the same noise
    rng = np.random.default_rng(7)
    late = []
    for _ in range(300):
        micro = [(TRUE_G / 2 + SIGMA * rng.standard_normal((16, D))).mean(axis=0) for _ in range(4)]
        total = np.mean(micro, axis=0)
        late.append(StepNorms(tuple(float(g @ g) for g in micro), (16,) * 4, float(total @ total)))
    run = early + late
    ema, mean = noise_scale(run, "ema", decay=0.99), noise_scale(run, "mean")
    assert ema.b_noise == pytest.approx(4 * TRUE_B, rel=0.2)
    assert mean.b_noise is not None and mean.b_noise < 0.5 * ema.b_noise  # the run's mean lags


def test_fieller_is_unbounded_where_the_gradient_is_not_told_from_zero() -> None:
    assert fieller([5.0, 6.0, 4.0, 5.0], [0.1, -0.1, 0.05, -0.02]) == (0.0, math.inf)
    lo, hi = fieller([10.0, 12.0, 8.0, 10.5], [1.0, 1.1, 0.9, 1.0])
    assert lo < 10 < hi < 20


def test_noise_with_no_signal_has_no_noise_scale() -> None:
    rng = np.random.default_rng(1)
    steps = []
    for _ in range(60):
        micro = [(SIGMA * rng.standard_normal((8, D))).mean(axis=0) for _ in range(4)]
        total = np.mean(micro, axis=0)
        steps.append(StepNorms(tuple(float(g @ g) for g in micro), (8,) * 4, float(total @ total)))
    est = noise_scale(steps)
    assert est.high == math.inf  # |G|^2 = 0 cannot be told apart from 0
    assert est.b_noise is None or est.b_noise > 10 * TRUE_B


def test_across_seeds_is_a_geometric_interval() -> None:
    centre, lo, hi = across_seeds([40.0, 50.0, 62.5])
    assert centre == pytest.approx(50.0)
    assert lo < 40 and hi > 62.5
    with pytest.raises(ValueError):
        across_seeds([50.0])
