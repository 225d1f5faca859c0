"""The hand-written search against Optuna like for like (tests/optuna_rival.py): the ordered
axes, the pruners at the same reduction factor, the same budget; a few seeds here, the full
table from scripts/tune_vs_optuna.py. The speed search stays hand-written because of this
comparison; the time-to-target search runs on Optuna (tune.target_search)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("optuna")

import optuna_rival as R

from gpubench.tune.search import Config, round_scale

SEEDS = range(3)


def test_a_recorded_grid_is_its_rows() -> None:
    p = R.recorded("mlp")
    assert p.space.size == 72 and len(p.space.combos) == 8
    assert p.found(max(p.space.combos and _configs(p), key=lambda c: p.truth(c) or 0.0))


def _configs(p: R.Problem) -> list[Config]:
    return [Config(c, b) for c in p.space.combos for b in p.space.batch_sizes]


@pytest.mark.parametrize("how", R.RIVALS)
def test_optuna_spends_no_more_than_the_budget_and_prunes(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spent: list[float] = []
    noisy = R.noisy

    def counted(problem: R.Problem, seed: int) -> Callable[[Config, int], float | None]:
        measure = noisy(problem, seed)

        def m(config: Config, rnd: int) -> float | None:
            spent.append(round_scale(rnd))
            return measure(config, rnd)

        return m

    monkeypatch.setattr(R, "noisy", counted)
    problem = R.synthetic()[0]
    assert R.rival(problem, 0, 5.0, how) is not None
    assert 0 < sum(spent) <= 5.0 + 1e-9
    # pruned: fewer full-length measurements than round-0 ones
    assert spent.count(round_scale(2)) < spent.count(round_scale(0))


def test_the_hand_written_search_finds_the_answer_at_least_as_often_as_each_rival() -> None:
    """Summed over the simulated and the recorded surfaces (the decision that the speed search
    stays hand-written rests on it; the full table, 50 seeds, in the README)."""
    problems = [*R.synthetic(), *(R.recorded(name) for name in R.GRIDS)]
    tallies = [R.compare(p, SEEDS) for p in problems]
    total = {k: sum(t.found[k] for t in tallies) for k in tallies[0].found}
    hand = total.pop("hand-written")
    # a floor against a broken search: over 50 seeds it finds the answer 272 of 300 times
    # (91%, docs/tune.md); on these 18 draws two standard deviations below that is 13.9
    assert hand >= 13, tallies
    assert all(hand >= v for v in total.values()), total


@pytest.mark.parametrize("name", list(R.V3))
def test_at_a_quarter_of_the_grid_the_pick_is_within_3pct_by_the_grids_own_figures(
    name: str,
) -> None:
    """The published grids (results/20261124-cpu-tune-vs-grid-v3) replayed with each row's own
    noise at 25% of the grid's cost: over 50 seeds (scripts/tune_vs_optuna.py) the pick was
    within 3% of the grid's best 50 of 50 times on each grid, so every one of these draws is."""
    for seed in SEEDS:
        ratio, spent = R.replay(name, seed)
        assert ratio is not None and ratio >= 1 - R.MARGIN, (name, seed, ratio)
        assert spent <= 0.25 * 72


def test_a_rival_is_deterministic_for_its_seed() -> None:
    problem = R.recorded("cnn")
    assert R.rival(problem, 1, 4.0, "tpe+hyperband") == R.rival(problem, 1, 4.0, "tpe+hyperband")
