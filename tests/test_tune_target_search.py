"""The time-to-target search's pure core (gpubench.tune.target_search) on synthetic learning
curves: no training, so every decision and count below is exact."""

from __future__ import annotations

import math
import random

import pytest

from gpubench.tune.target_search import (
    CONTENDERS,
    SLACK,
    Request,
    Rungs,
    TargetConfig,
    TrialRun,
    search,
    seed_spread,
)

TARGET = 0.9
EVAL_EVERY_S = 0.05  # training seconds between the synthetic curve's evaluations
OVERHEAD_S = 0.5  # wall seconds a synthetic run costs beyond its training (eval, process)


def config(b: int) -> TargetConfig:
    return TargetConfig(batch_size=b, lr_scaling="sqrt", lr_base=0.003, lr=0.003)


def curve_train(curves: dict[int, tuple[float, float]], noise: float = 0.0):
    """A Train over synthetic curves: batch size -> (ceiling, tau), accuracy(t) =
    ceiling * (1 - exp(-t / tau)) (+ seeded noise), evaluated every EVAL_EVERY_S training
    seconds and stopped at the target, as the convergence runner does."""
    calls: list[tuple[int, int, float]] = []

    def train(r: Request) -> TrialRun:
        c, seed, limit_s = r.config, r.seed, r.limit_s
        calls.append((c.batch_size, seed, limit_s))
        ceiling, tau = curves[c.batch_size]
        rng = random.Random(c.batch_size * 1000 + seed)
        scale = 1 + 0.1 * seed  # a later seed is a little slower
        best, t = -math.inf, 0.0
        while t < limit_s:
            t = min(limit_s, t + EVAL_EVERY_S)
            acc = ceiling * (1 - math.exp(-t / (tau * scale))) + rng.gauss(0, noise)
            best = max(best, acc)
            if acc >= TARGET:
                return TrialRun("ok", t, best, t, t + OVERHEAD_S)
        return TrialRun("ok", t, best, None, t + OVERHEAD_S)

    train.calls = calls  # type: ignore[attr-defined]
    return train


def test_a_hopeless_trial_is_stopped_at_the_first_rung_and_the_best_survives() -> None:
    # Nine configurations, none at the target by the first rung (1 s); B=4 never gets there
    # (its ceiling is under the target), B=64 is the fastest (reaches 0.9 at 2.3 * tau).
    curves = {4: (0.3, 0.5), 8: (1.0, 3.0), 16: (1.0, 2.5), 32: (1.0, 2.0), 64: (1.0, 1.2)}
    curves |= {128: (1.0, 1.6), 256: (1.0, 4.0), 512: (1.0, 6.0), 1024: (0.5, 1.0)}
    configs = [config(b) for b in curves]
    train = curve_train(curves)
    rungs = Rungs.geometric(9.0, 3, 3)
    assert rungs.limits_s == (1.0, 3.0, 9.0)
    result = search(configs, train, "eval_accuracy", rungs, budget_s=1e9)

    hopeless = [s for s in result.steps if s.config.batch_size in (4, 1024)]
    assert [(s.rung, s.decision) for s in hopeless] == [(0, "stopped"), (0, "stopped")]
    assert all(s.reason.startswith("pruned") for s in hopeless)
    assert result.best is not None and configs[result.best].batch_size == 64
    assert result.best_s == pytest.approx(2.3 * 1.2, abs=EVAL_EVERY_S)
    # The stated bound: at most n + n/eta + n/eta^2 trial-rungs (9 + 3 + 1); here the best
    # reached the target at rung 1, so no trial ran the top rung.
    assert len(result.steps) <= 9 + 3 + 1
    assert len(result.steps) == 9 + 3
    assert result.trials_measured() == 9 and not result.stopped_by_budget


def test_once_a_trial_reaches_the_target_the_others_train_only_up_to_twice_its_time() -> None:
    curves = {8: (1.0, 0.2), 16: (1.0, 0.1), 32: (1.0, 2.0), 64: (0.5, 0.1)}
    train = curve_train(curves)
    configs = [config(b) for b in curves]
    result = search(configs, train, "eval_accuracy", Rungs((1.0, 3.0), 3), budget_s=1e9)
    best_8 = result.steps[0].run.time_to_target_s
    assert best_8 == pytest.approx(2.3 * 0.2, abs=EVAL_EVERY_S)
    # every later trial trains up to twice the best time so far (SLACK), not the rung's 1 s
    best_16 = result.steps[1].run.time_to_target_s
    assert [limit for _, _, limit in train.calls][1:] == [2 * best_8, 2 * best_16, 2 * best_16]
    assert configs[result.best].batch_size == 16
    decisions = {s.config.batch_size: (s.decision, s.reason.split(":")[0]) for s in result.steps}
    assert decisions[32] == ("stopped", "hopeless")
    assert decisions[64] == ("stopped", "hopeless")
    assert decisions[8][0] == decisions[16][0] == "reached"
    assert len(result.steps) == 4  # one rung: nothing short of the target can beat 16's time


def test_the_best_is_found_among_many_noisy_curves_within_the_stated_trial_rungs() -> None:
    rng = random.Random(7)
    curves = {b: (rng.uniform(0.85, 1.0), rng.uniform(0.6, 6.0)) for b in range(1, 28)}
    reachable = {b: tau for b, (ceiling, tau) in curves.items() if ceiling > TARGET + 0.02}
    fastest = min(reachable, key=lambda b: reachable[b] * -math.log(1 - TARGET / curves[b][0]))
    configs = [config(b) for b in curves]
    result = search(
        configs,
        curve_train(curves, noise=0.01),
        "eval_accuracy",
        Rungs.geometric(27.0, 4, 3),
        budget_s=1e9,
    )
    # 27 + 9 + 3 + 1 = 40 trial-rungs at most (eta = 3, four rungs)
    assert len(result.steps) <= 40
    assert configs[result.best].batch_size == fastest


def test_the_budget_ends_the_search_with_the_best_so_far() -> None:
    curves = {b: (1.0, 3.0 + b / 100) for b in (8, 16, 32, 64, 128, 256)}
    configs = [config(b) for b in curves]
    # each first-rung run costs 1 s of training + OVERHEAD_S: the budget lets 4 of 6 run
    result = search(
        configs,
        curve_train(curves),
        "eval_accuracy",
        Rungs((1.0, 3.0, 9.0), 3),
        budget_s=4 * (1.0 + OVERHEAD_S),
    )
    assert result.stopped_by_budget
    assert result.trials_measured() == 4
    assert result.best is None
    assert all(s.decision == "stopped" for s in result.steps)
    assert any(s.reason == "the budget ran out" for s in result.steps)


def test_the_answer_is_rerun_on_more_seeds_with_its_median_and_range() -> None:
    curves = {8: (1.0, 1.0), 16: (1.0, 0.5)}
    configs = [config(b) for b in curves]
    train = curve_train(curves)
    rungs = Rungs((2.0, 6.0), 3)
    result = search(configs, train, "eval_accuracy", rungs, budget_s=1e9, seeds=3)
    spent = result.spent_s
    spread = seed_spread(result, train, 3, rungs)
    assert spread is not None and spread.complete and spread.runs == 3
    t0 = result.best_s
    # seeds 1 and 2 train 10% and 20% slower (curve_train), up to the top rung
    assert spread.min_s == pytest.approx(t0)
    assert spread.median_s == pytest.approx(1.1 * t0, abs=EVAL_EVERY_S)
    assert spread.max_s == pytest.approx(1.2 * t0, abs=EVAL_EVERY_S)
    seeds = [s for s in result.steps if s.decision == "seed"]
    assert [(s.seed, s.rung, s.limit_s) for s in seeds] == [(1, 2, 6.0), (2, 2, 6.0)]
    assert result.spent_s > spent
    assert "median over 3 seeds" in spread.describe()


def test_the_loss_metric_ranks_the_lower_first() -> None:
    def train(r: Request) -> TrialRun:
        c, limit_s = r.config, r.limit_s
        return TrialRun("ok", limit_s, {8: 3.0, 16: 2.0, 32: 4.0}[c.batch_size], None, limit_s)

    result = search(
        [config(8), config(16), config(32)], train, "eval_loss", Rungs((1.0, 3.0), 3), budget_s=1e9
    )
    kept = [s.config.batch_size for s in result.steps if s.decision == "kept"]
    assert kept == [16]
    assert [s.config.batch_size for s in result.steps if s.rung == 1] == [16]


def test_a_failed_run_is_stopped_with_its_status() -> None:
    def train(r: Request) -> TrialRun:
        if r.config.batch_size == 8:
            return TrialRun("oom", 0.0, None, None, 0.1, error="out of memory")
        return TrialRun("ok", 0.5, 0.95, 0.5, 1.0)

    result = search([config(8), config(16)], train, "eval_accuracy", Rungs((1.0,), 3), 1e9)
    assert (result.steps[0].decision, result.steps[0].reason) == ("stopped", "oom: out of memory")
    assert configs_best(result) == 16


def configs_best(result) -> int:
    return next(s.config.batch_size for s in result.steps if s.trial == result.best)


def test_rungs_reject_bad_settings() -> None:
    with pytest.raises(ValueError, match="eta 1"):
        Rungs.geometric(10.0, 3, 1)
    with pytest.raises(ValueError, match="rung count 0"):
        Rungs.geometric(10.0, 0, 3)


def test_the_answer_is_the_contender_with_the_least_median_over_seeds() -> None:
    # seed 0 favours B=32 (0.30 s) over B=64 (0.34 s) and B=16 (0.38 s), but B=32's other seeds
    # take 0.9 s and 1.0 s where B=64's take 0.33 s and 0.36 s: one seed cannot order them
    times = {32: (0.30, 0.9, 1.0), 64: (0.34, 0.33, 0.36), 16: (0.38, 0.40, 0.41)}
    times |= {8: (0.55, 0.56, 0.57)}  # reaches within SLACK x the best: not a contender (4th)

    def train(r: Request) -> TrialRun:
        t = times[r.config.batch_size][r.seed]
        if t > r.limit_s:
            return TrialRun("ok", r.limit_s, 0.5, None, r.limit_s + OVERHEAD_S)
        return TrialRun("ok", t, TARGET, t, t + OVERHEAD_S)

    configs = [config(b) for b in times]
    rungs = Rungs((2.0,), 3)
    result = search(configs, train, "eval_accuracy", rungs, budget_s=1e9, seeds=3)
    assert SLACK == 2.0 and CONTENDERS == 3
    assert [s.decision for s in result.steps] == ["reached"] * 4  # 0.55 < 2 x 0.30
    answer = seed_spread(result, train, 3, rungs)
    assert configs[result.best].batch_size == 64 and result.best_s == 0.34
    assert answer is not None and answer.median_s == 0.34 and answer.complete
    reruns = [(s.config.batch_size, s.seed) for s in result.steps if s.decision == "seed"]
    assert reruns == [(32, 1), (32, 2), (64, 1), (64, 2), (16, 1), (16, 2)]  # not B=8
