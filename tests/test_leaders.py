"""Issue 21, item 1: which rows could be the fastest, and whether interleaved rounds show one
ahead (science.leaders), on synthetic samples: nothing is timed here."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpubench.science import leaders


def _row(sps: float, ci: float, **extra: Any) -> dict[str, Any]:
    return {"samples_per_s": sps, "step_time_ci_rel": ci, **extra}


def test_candidates_are_the_leader_the_overlapping_rows_and_the_runner_up() -> None:
    rows = [_row(1000, 0.02, b=1), _row(990, 0.02, b=2), _row(700, 0.02, b=3), _row(600, 0.5, b=4)]
    chosen = [r["b"] for r in leaders.candidates(rows)]
    # 990 overlaps 1000; 700 does not; 600 +-50% reaches up to 1200, so it could be the fastest
    assert chosen == [1, 2, 4]
    clear = [_row(1000, 0.01, b=1), _row(500, 0.01, b=2), _row(400, 0.01, b=3)]
    assert [r["b"] for r in leaders.candidates(clear)] == [1, 2]  # the runner-up, always
    many = [_row(1000 - i, 0.05, b=i, step_time_s=0.001) for i in range(8)]
    assert len(leaders.candidates(many)) == 8  # every one could be the fastest
    assert len(leaders.affordable(leaders.candidates(many), 1e3)) == leaders.MAX_CANDIDATES


def test_a_row_without_an_interval_reads_one_from_its_raw_step_times() -> None:
    times = list(np.random.default_rng(0).lognormal(np.log(0.01), 0.02, 40))
    low, high = leaders.interval({"samples_per_s": 100.0, "step_times_s": times})
    assert 90 < low < 100 < high < 110
    # no step times at all: its figure alone, never an interval that reaches everything
    assert leaders.interval({"samples_per_s": 100.0}) == (100.0, 100.0)


def _rounds(
    true: list[float], rounds: int, noise: float, shared: bool, seed: int
) -> list[list[float]]:
    """Samples/s per candidate and round: `true` times a machine-wide factor per round (the
    contention every candidate of one round shares; wild) and a small noise of each window."""
    rng = np.random.default_rng(seed)
    machine = rng.uniform(0.3, 1.0, rounds) if shared else np.ones(rounds)
    return [list(t * machine * rng.lognormal(0, noise, rounds)) for t in true]


def test_a_lead_holds_through_contention_that_falls_on_every_candidate_alike() -> None:
    # a 4% lead; each round the machine slows everyone by 0-70%: unpaired, the two candidates'
    # figures overlap completely; paired round by round, the lead is plain
    x = _rounds([1040.0, 1000.0], 9, 0.005, shared=True, seed=1)
    assert min(x[0]) < max(x[1])  # the raw figures overlap
    d = leaders.decide(x)
    assert d.winner == 0 and d.tied == [] and d.comparisons[0].low > 1.0
    assert d.comparisons[0].ratio == pytest.approx(1.04, abs=0.01)


def test_a_difference_within_the_noise_is_a_tie_with_its_bounds() -> None:
    x = _rounds([1005.0, 1000.0, 700.0], 9, 0.03, shared=True, seed=2)
    d = leaders.decide(x)
    assert d.winner is None and sorted(d.tied) == [0, 1]  # the 700 one is beaten, not tied
    comp = next(c for c in d.comparisons if c.candidate in d.tied)
    assert comp.low <= 1.0 <= comp.high


def test_the_leader_of_the_rounds_is_named_whatever_the_sweep_said() -> None:
    # candidate 0 led the sweep (it is listed first), but the rounds put candidate 1 ahead
    d = leaders.decide(_rounds([1000.0, 1100.0], 8, 0.01, shared=False, seed=3))
    assert d.leader == 1 and d.winner == 1


def test_decide_needs_enough_rounds_and_sane_figures() -> None:
    with pytest.raises(ValueError, match="6 rounds"):
        leaders.decide([[1.0] * 5, [1.0] * 5])
    with pytest.raises(ValueError, match="finite and positive"):
        leaders.decide([[1.0] * 6, [0.0] * 6])


def test_a_decision_survives_its_json_record() -> None:
    d = leaders.decide(_rounds([1005.0, 1000.0], 7, 0.03, shared=True, seed=4))
    assert leaders.Decision.from_dict(d.to_dict()) == d


def test_the_candidates_are_trimmed_to_what_the_budget_can_re_measure() -> None:
    rows = [{"step_time_s": t} for t in (0.1, 0.1, 0.2, 0.4)]
    # steps each candidate costs at least: its set-up and its rounds in each process
    per_step = (leaders.SETUP_STEPS + leaders.ROUNDS_PER_PROCESS) * leaders.PROCESSES
    assert leaders.affordable(rows, per_step * 0.8) == rows  # all four fit
    assert leaders.affordable(rows, per_step * 0.5) == rows[:3]  # the farthest is dropped
    assert leaders.affordable(rows, per_step * 0.2) == rows[:2]
    assert leaders.affordable(rows, per_step * 0.19) == []  # not even the two leaders fit
    assert leaders.cost_s(rows[:2]) == pytest.approx(per_step * 0.2)


def test_the_sweeps_budget_covers_every_partitions_two_leaders_before_extra_rounds() -> None:
    from gpubench.run.confirm import MIN_BUDGET_S, _share

    # 6 s left, needs 0.5, 0.5, 2: the first takes its need and a third of the 3 s surplus
    assert _share(6.0, [0.5, 0.5, 2.0]) == pytest.approx(0.5 + 1.0)
    # what it leaves still covers the rest: 4.5 s for needs 0.5 and 2
    assert _share(4.5, [0.5, 2.0]) == pytest.approx(0.5 + 1.0)
    # short of the needs: an even share, never under the floor
    assert _share(1.0, [0.5, 2.0]) == pytest.approx(max(0.5, MIN_BUDGET_S))


def test_without_rounds_rows_within_the_drift_of_the_leader_tie() -> None:
    # 1000 +-1% and 950 +-1%: the intervals do not overlap, but the sweep measured them minutes
    # apart, and a machine's pace drifts by more than that between points
    rows = [_row(1000, 0.01, b=1), _row(950, 0.01, b=2), _row(800, 0.01, b=3)]
    assert [r["b"] for r in leaders.by_intervals(rows)] == [1, 2]


# Seven rounds of two configurations: B is 10% ahead in five rounds that share the machine with
# it; A's two fast rounds (a quiet minute) give A the higher median samples/s (440 against 410).
DISAGREE = [
    [450.0, 440.0, 436.0, 600.0, 610.0, 300.0, 310.0],
    [495.0, 484.0, 480.0, 400.0, 410.0, 330.0, 341.0],
]


def test_the_rounds_ratios_pick_the_leader_where_the_medians_disagree() -> None:
    d = leaders.decide(DISAGREE, margin=0.03)
    assert d.median_samples_per_s[0] > d.median_samples_per_s[1]  # the medians name A
    assert d.leader == 1  # the per-round ratios name B: x1.10 over A in five of seven rounds
    (c,) = d.comparisons
    assert c.candidate == 0 and c.ratio == pytest.approx(1.1, abs=0.005) and c.ratio >= 1
    # a record written when the medians picked the leader reads by the ratios too
    old = {**d.to_dict(), "leader": 0, "tied": [0, 1]}
    old["comparisons"] = [{"candidate": 1, "ratio": 1 / c.ratio, "low": 0.6, "high": 1.5}]
    part = {"decision": old, "samples_per_s": DISAGREE, "processes": [4, 3]}
    again = leaders.recorded(part, 0.03)
    assert again.leader == 1 and all(x.ratio >= 1 for x in again.comparisons)
    # without its rounds a record reads as written
    assert leaders.recorded({"decision": old}, 0.03).leader == 0


def test_no_leader_is_shown_at_less_than_x1_over_what_it_leads() -> None:
    rng = np.random.default_rng(5)
    disagreed = 0  # draws where the higher median samples/s trails by the ratios
    for _ in range(300):
        n, rounds = int(rng.integers(2, 5)), int(rng.integers(6, 10))
        pace = rng.uniform(0.5, 1.5, rounds)  # the machine's pace, shared by a round
        x = rng.uniform(95, 105, (n, 1)) * pace * rng.uniform(0.85, 1.15, (n, rounds))
        d = leaders.decide(x.tolist())
        ratio = [[float(np.median(x[a] / x[b])) for b in range(n)] for a in range(n)]
        top = int(np.argmax(np.median(x, axis=1)))
        disagreed += any(ratio[top][b] < 1 for b in range(n) if b != top)
        if any(all(ratio[a][b] >= 1 for b in range(n) if b != a) for a in range(n)):
            assert all(c.ratio >= 1 for c in d.comparisons), (x, d)
    assert disagreed >= 10
