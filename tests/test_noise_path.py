"""issue 51, item 4: B_noise along a run to its target (science.noise_path) is the critical batch
of the whole path, and the noise phase cuts its measured steps into stretches
(science.noise_training.stretches). Pure: synthetic stretches and norms, no training."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpubench.science import noise_path
from gpubench.science.gradient_noise import StepNorms, noise_scale
from gpubench.science.noise_path import (
    MIN_STRETCHES,
    Stretch,
    path_b_noise,
    path_noise,
    stretch_of,
)
from gpubench.science.noise_training import stretches


def _path(batch: int, least: list[float], b_noise: list[float]) -> list[Stretch]:
    """The stretches a run at `batch` trains where stretch i needs least[i] steps at the least
    and has B_noise b_noise[i]: n_i = least[i] (1 + b_noise[i]/batch) steps."""
    return [
        Stretch(round(s * (1 + b / batch)), 1.0, b) for s, b in zip(least, b_noise, strict=True)
    ]


def test_the_path_predicts_the_steps_to_its_end_at_every_batch() -> None:
    # B_noise grows along the run (McCandlish): 16 -> 640, the later stretches needing fewer
    # least steps; the run measured it at B=64
    least = [100.0, 80.0, 60.0, 40.0, 20.0]
    b_noise = [16.0, 64.0, 128.0, 320.0, 640.0]
    path = _path(64, least, b_noise)
    b_path = path_b_noise(path, 64)
    assert b_path == pytest.approx(
        sum(s * b for s, b in zip(least, b_noise, strict=True)) / sum(least)
    )
    for batch in (8, 64, 512, 4096):
        steps = sum(
            s * (1 + b / batch) for s, b in zip(least, b_noise, strict=True)
        )  # stretch by stretch
        assert sum(least) * (1 + b_path / batch) == pytest.approx(steps)
    # the same path measured at another batch gives the same figure (the runs differ, the
    # path does not)
    assert path_b_noise(_path(512, least, b_noise), 512) == pytest.approx(b_path, rel=1e-2)
    # an early window alone says far less than the path: it is what the phase measured before
    assert path_b_noise(path[:1], 64) == pytest.approx(16.0) and b_path > 5 * 16.0


def test_a_stretch_with_no_signal_adds_its_steps_and_no_weight() -> None:
    path = _path(64, [100.0, 100.0], [64.0, 64.0])  # 200 steps each, S_min 100 each
    lost = Stretch(50, -0.5, 10.0)  # |G|^2 not told apart from 0: B_noise unbounded
    assert math.isinf(lost.b_noise)
    # (100*64 + 100*64 + 50*64) / (100 + 100): the stretch counts as at most b per step
    assert path_b_noise([*path, lost], 64) == pytest.approx((6400 + 6400 + 3200) / 200)
    assert math.isinf(path_b_noise([lost, lost], 64))
    assert Stretch(10, 2.0, -1.0).b_noise == 0.0  # a negative trace estimate: no noise
    with pytest.raises(ValueError, match="need stretches and a batch >= 1"):
        path_b_noise([], 64)


def test_the_interval_resamples_the_stretches_and_is_seeded() -> None:
    rng = np.random.default_rng(3)
    path = [Stretch(50, 1.0, float(b)) for b in rng.uniform(100, 300, size=20)]
    got = path_noise(path, 64)
    assert got == path_noise(path, 64)  # the same stretches, the same interval
    assert got.low is not None and got.high is not None
    assert got.low < got.b_noise < got.high and got.stretches == 20 and got.steps == 1000
    # stretches that agree give a narrow interval around their common figure
    same = path_noise([Stretch(50, 1.0, 200.0)] * 6, 64)
    assert same.low == pytest.approx(200.0) and same.high == pytest.approx(200.0)
    # too few stretches: no interval
    short = path_noise(path[: MIN_STRETCHES - 1], 64)
    assert short.low is None and short.high is None
    # one stretch in three with no signal: some resamples hold only it, so the high end is inf
    lost = path_noise([Stretch(50, 1.0, 100.0), Stretch(50, 1.0, 120.0), Stretch(50, 0, 1)], 64)
    assert lost.high is not None and math.isinf(lost.high)


def test_an_interval_that_misses_the_figure_is_widened_to_hold_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # goodput.pick refuses an interval that does not hold B_noise; a percentile interval of a
    # ratio need not. One resample alone (a seeded draw of the 3 stretches) stands for it here
    monkeypatch.setattr(noise_path, "RESAMPLES", 1)
    path = [Stretch(50, 1.0, 100.0), Stretch(50, 1.0, 200.0), Stretch(50, 1.0, 400.0)]
    got = path_noise(path, 64)
    assert got.low is not None and got.high is not None
    assert got.low <= got.b_noise <= got.high and got.low < got.high


def _norms(rng: np.random.Generator, grad: np.ndarray, sigma: float, micro: int) -> StepNorms:
    """One step of 4 micro-batches of `micro` samples each: per-sample gradients grad + noise
    of variance sigma^2 per coordinate (tr(Sigma) = sigma^2 * dims)."""
    g = grad + rng.normal(0, sigma / math.sqrt(micro), size=(4, grad.size))
    return StepNorms(tuple(float(x @ x) for x in g), (micro,) * 4, float(g.mean(0) @ g.mean(0)))


def test_stretches_cut_a_run_into_measured_eights_and_keep_every_update() -> None:
    rng = np.random.default_rng(0)
    grad = np.full(50, 0.2)  # |G|^2 = 2
    norms = [_norms(rng, grad, 2.0, 16) for _ in range(20)]  # tr(Sigma) = 200: B_noise 100
    numbers = list(range(4, 84, 4))  # one update in 4 measured, from update 4
    cut = stretches(numbers, norms, steps=90)
    # 20 measured steps: a stretch of 8, then the last 12 with the updates after them
    assert [s.steps for s in cut] == [numbers[8], 90 - numbers[8]]
    assert sum(s.steps for s in cut) == 90
    truth = 200 / 2
    assert cut[0] == stretch_of(numbers[8], norms[:8])
    # the stretches' estimates average to the truth over many steps (the estimator is
    # unbiased for |G|^2 and tr(Sigma)): within 10%
    many = [_norms(rng, grad, 2.0, 16) for _ in range(4000)]
    est = noise_scale(many)
    assert est.b_noise == pytest.approx(truth, rel=0.1)
    long = stretches(list(range(4000)), many, steps=4000)
    assert len(long) == 500 and path_b_noise(long, 64) == pytest.approx(truth, rel=0.25)
    # a stretch with no finite norm is left out, with its updates
    bad = StepNorms((math.inf,) * 4, (16,) * 4, 1.0)
    assert stretches([0, 1], [bad, bad], steps=2) == ()
