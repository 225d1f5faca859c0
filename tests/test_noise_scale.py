from __future__ import annotations

import pytest
import torch
from torch import nn

from gpubench.science.noise_scale import NoiseScale, gradient_norms, two_batch_estimates


def test_two_batch_estimator_inverts_the_expected_squared_norms() -> None:
    g2, trace = 10.0, 40.0  # B_simple = 4
    expected = {b: g2 + trace / b for b in (8, 64)}  # E|G_B|^2 = |G|^2 + tr(Sigma)/B
    assert two_batch_estimates(expected[8], 8, expected[64], 64) == pytest.approx((g2, trace))
    with pytest.raises(ValueError):
        two_batch_estimates(1.0, 64, 1.0, 8)


def test_noise_scale_recovers_a_known_b_simple() -> None:
    # Per-sample loss w . z with z ~ N(mu, s^2 I): the per-sample gradient is z, so
    # G = mu (|G|^2 = d) and tr(Sigma) = d s^2; B_simple = s^2 = 4.
    torch.manual_seed(0)
    d, s = 10, 2.0
    model = nn.Linear(d, 1, bias=False)
    ema = NoiseScale(decay=0.99)
    assert ema.b_simple is None
    for _ in range(300):
        z = 1.0 + s * torch.randn(64, d)
        sq_small, b_small, sq_big, b_big = gradient_norms(
            model, lambda out, _: out.mean(), z, z, splits=4
        )
        assert (b_small, b_big) == (16, 64)
        ema.update(sq_small, b_small, sq_big, b_big)
    assert ema.grad_sq_norm == pytest.approx(d, rel=0.1)
    assert ema.trace_sigma == pytest.approx(d * s**2, rel=0.1)
    assert ema.b_simple == pytest.approx(s**2, rel=0.1)


def test_gradient_norms_leave_grads_and_batchnorm_statistics_alone() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 3)).eval()
    before = [b.clone() for b in model.buffers()]
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    sq_small, _, sq_big, _ = gradient_norms(model, nn.functional.cross_entropy, x, y, splits=4)
    assert sq_small > sq_big > 0  # smaller batches are noisier
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, model.buffers(), strict=True))
    assert not model.training
