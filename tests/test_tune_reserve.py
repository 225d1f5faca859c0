"""The confirmation's reserve follows what the search measured: its likely candidates (chosen
from each configuration's deepest row, as run.confirm chooses them), their step times, warm-ups
and set-up, and the points' seconds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpubench.config.spec import Budget
from gpubench.run import confirm
from gpubench.science import leaders
from gpubench.tune import trial
from gpubench.tune.plan import Candidate, Planner, TrialCost, confirmation_s
from gpubench.tune.search import Config

DATA = Path(__file__).parent / "data" / "tune" / "v4-cnn"

A = (("precision", "bf16"), ("compile", "eager"))
B = (("precision", "fp32"), ("compile", "eager"))
C = (("precision", "fp32"), ("compile", "compile"))


def planner(step_s: float) -> Planner:
    p = Planner(100.0, lambda: 0.0, [1.0, 3.0, 9.0], confirm.SHARE, prior_fixed_s=0.5)
    p.observe(TrialCost(B, 0, 0.2, 1.0, batch_size=64, step_time_s=step_s, samples_per_s=64.0,
                        warmup_s=0.3, point_s=1.5))  # fmt: skip
    p.observe(TrialCost(A, 1, 0.1, 2.0, batch_size=64, step_time_s=step_s / 2,
                        samples_per_s=128.0, warmup_s=0.2, point_s=2.5))  # fmt: skip
    p.observe(TrialCost(C, 1, 9.0, 2.0, compile_s=8.5, batch_size=64, step_time_s=step_s / 2,
                        samples_per_s=126.0, warmup_s=0.4, point_s=11.0))  # fmt: skip
    p.observe(TrialCost(B, 1, 0.3, 2.0, batch_size=32, step_time_s=step_s, samples_per_s=32.0,
                        warmup_s=0.1, point_s=2.0))  # fmt: skip
    return p


def test_the_reserve_is_its_leaders_confirmation_as_measured() -> None:
    p = planner(0.05)
    # the deepest round's leader and runner-up (within the margin: the compiled one), not the
    # slow one; the compiled one set up again without its compile (cached)
    assert p.candidates() == [Candidate(0.025, 0.2, 0.1), Candidate(0.025, 0.4, 0.5)]
    points = 1.5 + 2.5 + 11.0 + 2.0
    assert p.reserve_s() == pytest.approx(confirmation_s(p.candidates(), points))
    assert p.reserve_s(10.0) > p.reserve_s()  # more points: a longer confirmation budget


def test_the_reserve_grows_with_the_candidates_step_times_not_a_constant() -> None:
    fast, slow = planner(0.05).reserve_s(), planner(2.0).reserve_s()
    assert slow > fast
    # two 1 s steps: the rounds of one-step windows (and their switch steps) run until the
    # confirmation's deadline, DEADLINE x its budget, and one round past it
    budget = confirm.SHARE * (1.5 + 2.5 + 11.0 + 2.0)
    rounds = confirm.DEADLINE * budget + 2 * (1.0 + 1.0)
    assert slow == pytest.approx((0.1 + 0.5) + (0.2 + 0.4) + rounds)  # no worker start


def test_a_warm_up_its_trial_ended_unsteady_is_planned_to_the_confirmations_limit() -> None:
    steady = [Candidate(0.05, 0.1, 0.2), Candidate(0.05, 0.1, 0.2)]
    unsteady = [Candidate(0.05, math.inf, 0.2), Candidate(0.05, math.inf, 0.2)]
    budget = confirm.SHARE * 40.0
    assert confirmation_s(unsteady, 40.0) - confirmation_s(steady, 40.0) == pytest.approx(
        2 * (0.5 * budget / 2 - 0.1)
    )


def test_one_candidate_needs_no_confirmation() -> None:
    assert confirmation_s([Candidate(0.1, 0.1, 1.0)], 100.0) == 0.0


def test_the_reserve_counts_the_earlier_rounds_rows_the_confirmation_re_measures() -> None:
    # the published tune at 25% of the cnn grid: its search planned a confirmation of the
    # last round's two finalists (a 7.7 s reserve), run.confirm re-measured four rows of
    # results.jsonl (two from round 1) in 16.8 s, and the tune overran its budget by 5.7 s
    data = json.loads((DATA / "tune-at-25pct.json").read_text(encoding="utf-8"))
    p = Planner(data["budget_s"], lambda: 0.0, [1.0, 1.0, 1.0], confirm.SHARE)
    for t in data["trials"]:
        combo = tuple((k, t[k]) for k in ("precision", "compile", "threads"))
        p.observe(trial.cost(Config(combo, t["batch_size"]), t["tune_round"], t, t["wall_s"],
                             1.0, Budget()))  # fmt: skip
    assert len(p.candidates()) == leaders.MAX_CANDIDATES  # as the confirmation chose
    assert p.reserve_s() >= 0.9 * data["confirmation_s"]
    # the old plan's two finalists: the reserve the published search kept
    planned = data["budget_s"] - data["search_deadline_s"]
    assert p.reserve_s() > planned + (data["elapsed_s"] - data["budget_s"])
