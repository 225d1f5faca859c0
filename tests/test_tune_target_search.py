"""The time-to-target search (gpubench.tune.target_search, Optuna's study and successive-halving
pruner) on synthetic learning curves: no training, so every decision and count below is exact."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from optuna.trial import TrialState

from gpubench.tune.target_search import (
    CONTENDERS,
    SLACK,
    Request,
    Rungs,
    SearchResult,
    TargetConfig,
    TrialRun,
    rung_value,
    search,
    seed_spread,
)

TARGET = 0.9
EVAL_EVERY_S = 0.05  # training seconds between the synthetic curve's evaluations
OVERHEAD_S = 0.5  # wall seconds a synthetic run costs beyond its training (eval, process)


def config(b: int) -> TargetConfig:
    return TargetConfig(batch_size=b, lr_scaling="sqrt", lr_base=0.003, lr=0.003)


def states(result: SearchResult) -> dict[str, int]:
    return dict(Counter(t.state.name for t in result.study.trials))


def run_search(
    curves: dict, train, rungs: Rungs, budget_s: float = 1e9, seeds: int = 1, into_eta=None
) -> SearchResult:
    result = SearchResult([config(b) for b in curves], into_eta or rungs.eta)
    return search(result, train, "eval_accuracy", TARGET, rungs, budget_s, seeds)


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


def test_the_fastest_configuration_is_found_and_the_pruner_stops_the_slow_at_the_first_rung() -> (
    None
):
    # Nine configurations, none at the target by the first rung (1 s); B=4 and B=1024 never get
    # there (their ceilings are under the target), B=64 is the fastest (0.9 at 2.3 * tau).
    curves = {4: (0.3, 0.5), 8: (1.0, 3.0), 16: (1.0, 2.5), 32: (1.0, 2.0), 64: (1.0, 1.2)}
    curves |= {128: (1.0, 1.6), 256: (1.0, 4.0), 512: (1.0, 6.0), 1024: (0.5, 1.0)}
    rungs = Rungs.geometric(9.0, 3, 3)
    assert rungs.limits_s == (1.0, 3.0, 9.0)
    result = run_search(curves, curve_train(curves), rungs)

    assert result.best is not None and result.configs[result.best].batch_size == 64
    assert result.best_s == pytest.approx(2.3 * 1.2, abs=EVAL_EVERY_S)
    assert result.trials_measured() == 9 and not result.stopped_by_budget
    runs = result.runs()
    assert [r["run"] for r in runs] == list(range(len(runs)))
    # every configuration runs the first rung before any runs the next; of the nine, each of
    # the last three is worse at 1 s than the best third before it: pruned there
    assert [r["rung"] for r in runs[:9]] == [0] * 9
    fates = [(r["config"]["batch_size"], r["decision"]) for r in runs[6:9]]
    assert fates == [(256, "stopped"), (512, "stopped"), (1024, "stopped")]
    assert all(r["reason"].startswith("pruned") for r in runs[6:9])
    # at rung 1 the most promising goes first: B=64 (the least value at 1 s) reaches the target
    assert (runs[9]["config"]["batch_size"], runs[9]["decision"]) == (64, "reached")
    # a configuration that never reaches the target never reaches it in the record either
    assert not any(r["decision"] == "reached" for r in runs if r["id"] in (0, 8))
    # one study trial per configuration: complete where it reached the target, else pruned
    trials = result.study.trials
    assert len(trials) == 9 and states(result) == {"COMPLETE": 1, "PRUNED": 8}
    for t in trials:
        mine = [r for r in runs if r["optuna_trial"] == t.number]
        assert t.params["batch_size"] == mine[0]["config"]["batch_size"]
        assert sorted(t.intermediate_values) == [3 ** r["rung"] for r in mine]
        reached = mine[-1]["decision"] == "reached"
        assert t.state == (TrialState.COMPLETE if reached else TrialState.PRUNED)
        # a pruned trial's value is its last report
        assert t.value == mine[-1]["time_to_target_s" if reached else "value"]


def test_successive_halving_keeps_a_run_only_among_the_best_third_reported_at_its_rung() -> None:
    # none reaches the target; in arrival order at 1 s: 0.5, 0.6, 0.4, 0.7, 0.3, 0.65. The first
    # eta - 1 at a rung go on only as the best so far; then the best 1/3 of those reported
    best = {8: 0.5, 16: 0.6, 32: 0.4, 64: 0.7, 128: 0.3, 256: 0.65}

    def train(r: Request) -> TrialRun:
        return TrialRun("ok", r.limit_s, best[r.config.batch_size], None, r.limit_s)

    result = run_search(best, train, Rungs((1.0, 3.0), 3))
    first = {r["config"]["batch_size"]: r["decision"] for r in result.runs() if r["rung"] == 0}
    assert first == {8: "kept", 16: "kept", 32: "stopped", 64: "kept", 128: "stopped", 256: "kept"}
    top = [r for r in result.runs() if r["rung"] == 1]
    assert [r["config"]["batch_size"] for r in top] == [64, 256, 16, 8]  # the best first
    assert all(r["reason"].startswith("not at the target within the top rung") for r in top)
    assert result.best is None and states(result) == {"PRUNED": 6}


def test_once_a_trial_reaches_the_target_the_others_train_only_up_to_twice_its_time() -> None:
    curves = {8: (1.0, 0.2), 16: (1.0, 0.1), 32: (1.0, 2.0), 64: (0.5, 0.1)}
    train = curve_train(curves)
    result = run_search(curves, train, Rungs((1.0, 3.0), 3))
    runs = result.runs()
    best_8 = runs[0]["time_to_target_s"]
    assert best_8 == pytest.approx(2.3 * 0.2, abs=EVAL_EVERY_S)
    # every later trial trains up to twice the best time so far (SLACK), not the rung's 1 s
    best_16 = runs[1]["time_to_target_s"]
    assert [limit for _, _, limit in train.calls][1:] == [2 * best_8, 2 * best_16, 2 * best_16]
    assert result.configs[result.best].batch_size == 16
    decisions = {
        r["config"]["batch_size"]: (r["decision"], r["reason"].split(":")[0]) for r in runs
    }
    assert decisions[32] == ("stopped", "hopeless")
    assert decisions[64] == ("stopped", "hopeless")
    assert decisions[8][0] == decisions[16][0] == "reached"
    assert len(runs) == 4  # one rung: nothing short of the target can beat 16's time


def test_the_best_is_found_among_many_noisy_curves() -> None:
    rng = random.Random(7)
    curves = {b: (rng.uniform(0.85, 1.0), rng.uniform(0.6, 6.0)) for b in range(1, 28)}
    reachable = {b: tau for b, (ceiling, tau) in curves.items() if ceiling > TARGET + 0.02}
    fastest = min(reachable, key=lambda b: reachable[b] * -math.log(1 - TARGET / curves[b][0]))
    rungs = Rungs.geometric(27.0, 4, 3)
    result = run_search(curves, curve_train(curves, noise=0.01), rungs)
    assert result.configs[result.best].batch_size == fastest
    # the pruner stopped some at a lower rung: fewer runs than every configuration on every rung
    assert any(r["reason"].startswith("pruned") for r in result.runs())
    assert len(result.runs()) < 27 * 4
    again = run_search(curves, curve_train(curves, noise=0.01), rungs)
    assert again.runs() == result.runs()  # deterministic: the seeded study decides alike


def test_the_budget_ends_the_search_with_no_run_started_past_it() -> None:
    curves = {b: (1.0, 3.0 + b / 100) for b in (8, 16, 32, 64, 128, 256)}
    budget = 4 * (1.0 + OVERHEAD_S)
    # each first-rung run costs 1 s of training + OVERHEAD_S: four fit the budget; B=8 (the
    # first, so the best at its rung so far) was kept, but its next rung never starts
    result = run_search(curves, curve_train(curves), Rungs((1.0, 3.0, 9.0), 3), budget)
    assert result.stopped_by_budget and result.best is None
    runs = result.runs()
    assert [(r["rung"], r["decision"]) for r in runs] == [(0, "stopped")] * 4
    assert runs[0]["reason"] == "the budget ran out"
    assert all(r["reason"].startswith("pruned") for r in runs[1:])
    assert result.spent_s == pytest.approx(budget) and result.trials_measured() == 4
    assert states(result) == {"PRUNED": 4}


def test_the_contenders_re_runs_are_kept_room_for_in_the_budget() -> None:
    # each run reaches the target in 1 s and costs 1.5 s; with 3 seeds each contender needs
    # 2 x 1.5 s more: after 3 search runs (4.5 s) the contenders reserve 9 s, and a 4th run's
    # 2-s limit does not fit in a 15-s budget
    def train(r: Request) -> TrialRun:
        return TrialRun("ok", 1.0, TARGET, 1.0, 1.0 + OVERHEAD_S)

    curves = dict.fromkeys((8, 16, 32, 64, 128), None)
    result = run_search(curves, train, Rungs((2.0,), 3), budget_s=15.0, seeds=3)
    assert result.trials_measured() == 3 and result.stopped_by_budget
    spread = seed_spread(result, train, 3, Rungs((2.0,), 3))
    assert spread is not None and spread.complete
    assert result.spent_s == pytest.approx(4.5 + 9.0)  # 3 search runs and 6 re-runs


def test_the_answer_is_rerun_on_more_seeds_with_its_median_and_range() -> None:
    curves = {8: (1.0, 1.0), 16: (1.0, 0.5)}
    train = curve_train(curves)
    rungs = Rungs((2.0, 6.0), 3)
    result = run_search(curves, train, rungs, seeds=3)
    spent = result.spent_s
    spread = seed_spread(result, train, 3, rungs)
    assert spread is not None and spread.complete and spread.runs == 3
    t0 = result.best_s
    # seeds 1 and 2 train 10% and 20% slower (curve_train), up to the top rung
    assert spread.min_s == pytest.approx(t0)
    assert spread.median_s == pytest.approx(1.1 * t0, abs=EVAL_EVERY_S)
    assert spread.max_s == pytest.approx(1.2 * t0, abs=EVAL_EVERY_S)
    seeds = [r for r in result.runs() if r["decision"] == "seed"]
    assert [(r["seed"], r["rung"], r["limit_s"]) for r in seeds] == [
        (s, 2, 6.0) for b in (16, 8) for s in (1, 2)
    ]
    assert result.spent_s > spent
    assert "median over 3 seeds" in spread.describe()
    # each re-run is a trial of its own in the study, complete with its time to target
    rerun = {t.number: t for t in result.study.trials if t.user_attrs["seed"] > 0}
    assert len(rerun) == 4 and all(t.state == TrialState.COMPLETE for t in rerun.values())
    assert [rerun[r["optuna_trial"]].value for r in seeds] == [r["time_to_target_s"] for r in seeds]


def test_the_loss_metric_ranks_the_lower_first() -> None:
    loss = {8: 3.0, 16: 2.0, 32: 4.0}

    def train(r: Request) -> TrialRun:
        return TrialRun("ok", r.limit_s, loss[r.config.batch_size], None, r.limit_s)

    rungs = Rungs((1.0, 3.0), 3)
    result = SearchResult([config(b) for b in loss], 3)
    search(result, train, "eval_loss", 1.0, rungs, budget_s=1e9)
    # B=16 (a lower loss than B=8 before it) goes on; B=32 (the highest so far) is pruned
    first = {r["config"]["batch_size"]: r["decision"] for r in result.runs() if r["rung"] == 0}
    assert first == {8: "kept", 16: "kept", 32: "stopped"}


def test_a_run_reports_a_value_that_orders_reached_first_then_nearer_the_target() -> None:
    def run(best: float | None, reached_s: float | None = None) -> TrialRun:
        return TrialRun("ok", 1.0, best, reached_s, 1.0)

    assert rung_value(run(0.95, 0.7), 1.0, "eval_accuracy", TARGET) == 0.7
    near, far = (rung_value(run(b), 1.0, "eval_accuracy", TARGET) for b in (0.85, 0.5))
    assert 1.0 < near < far  # past the rung's limit, which every run that reached it beat
    assert rung_value(run(0.5), 1.0, "eval_loss", 0.4) < rung_value(run(0.9), 1.0, "eval_loss", 0.4)
    assert rung_value(run(None), 1.0, "eval_accuracy", TARGET) == math.inf


def test_a_failed_run_is_stopped_with_its_status() -> None:
    def train(r: Request) -> TrialRun:
        if r.config.batch_size == 8:
            return TrialRun("oom", 0.0, None, None, 0.1, error="out of memory")
        return TrialRun("ok", 0.5, 0.95, 0.5, 1.0)

    result = run_search({8: None, 16: None}, train, Rungs((1.0,), 3))
    first = result.runs()[0]
    assert (first["decision"], first["reason"]) == ("stopped", "oom: out of memory")
    assert result.configs[result.best].batch_size == 16
    assert [t.state for t in result.study.trials] == [TrialState.FAIL, TrialState.COMPLETE]


def test_rungs_reject_bad_settings() -> None:
    with pytest.raises(ValueError, match="eta 1"):
        Rungs.geometric(10.0, 3, 1)
    with pytest.raises(ValueError, match="rung count 0"):
        Rungs.geometric(10.0, 0, 3)
    with pytest.raises(ValueError, match="eta 3 is not the study's reduction factor 2"):
        run_search({8: None}, curve_train({}), Rungs((1.0, 2.0), 3), into_eta=2)


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

    rungs = Rungs((2.0,), 3)
    result = run_search(times, train, rungs, seeds=3)
    assert SLACK == 2.0 and CONTENDERS == 3
    assert [r["decision"] for r in result.runs()] == ["reached"] * 4  # 0.55 < 2 x 0.30
    answer = seed_spread(result, train, 3, rungs)
    assert result.configs[result.best].batch_size == 64 and result.best_s == 0.34
    assert answer is not None and answer.median_s == 0.34 and answer.complete
    reruns = [
        (r["config"]["batch_size"], r["seed"]) for r in result.runs() if r["decision"] == "seed"
    ]
    assert reruns == [(32, 1), (32, 2), (64, 1), (64, 2), (16, 1), (16, 2)]  # not B=8
