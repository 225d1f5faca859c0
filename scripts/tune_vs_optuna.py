"""tune's hand-written search against Optuna's TPE sampler with its SuccessiveHalvingPruner, on
the simulated cost surfaces of tests/test_tune_search.py (noisy, a plateau, a cliff at the
memory limit), at the same cost in full measurements (a round-0 measurement costs 1/9 of one, a
round-1 one 1/3): how often each names a configuration within 2% of the optimum, over 50 seeds.
Synthetic: nothing is measured on this machine.

    PYTHONPATH=$PWD python scripts/tune_vs_optuna.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import test_tune_search as TS

from gpubench.tune.search import Config, round_scale, search

SEEDS = range(50)


def optuna_run(surface: TS.Surface, seed: int, cost_cap: float) -> float:
    """Optuna's best at the last round, as a share of the optimum, after `cost_cap` full
    measurements' worth."""
    measure = TS.noisy(surface, seed)
    study = optuna.create_study(
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3),
    )
    spent = 0.0
    finals = []
    while spent < cost_cap:
        t = study.ask()
        combo = TS.COMBOS[t.suggest_categorical("combo", list(range(len(TS.COMBOS))))]
        b = t.suggest_categorical("batch", list(TS.BATCHES))
        cfg = Config(combo, b)
        pruned = False
        v = None
        for rnd in range(3):
            v = measure(cfg, rnd)
            spent += round_scale(rnd)
            if v is None:
                break
            t.report(v, rnd)
            if rnd < 2 and t.should_prune():
                pruned = True
                break
        if v is None:
            study.tell(t, state=optuna.trial.TrialState.FAIL)
        elif pruned:
            study.tell(t, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(t, v)
            finals.append((v, cfg))
    if not finals:
        return 0.0
    return surface(max(finals, key=lambda x: x[0])[1]) / TS.optimum(surface)


def main() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    for surface in (TS.rise_and_fall, TS.plateau, TS.cliff):
        hand = []
        costs = []
        for seed in SEEDS:
            o = search(TS.SPACE, TS.noisy(surface, seed))
            hand.append(surface(o.best) / TS.optimum(surface))
            costs.append(sum(round_scale(t.round) for t in o.trials))
        cap = sum(costs) / len(costs)
        opt = [optuna_run(surface, s, cap) for s in SEEDS]
        print(
            f"{surface.__name__}: cost {cap:.1f} full measurements; {_said('hand-written', hand)}; "
            f"{_said('optuna TPE+SH', opt)}"
        )


def _said(name: str, ratios: list[float]) -> str:
    """How often a search named a configuration within the tie of the optimum, its worst and
    mean ratio to the optimum."""
    within = sum(x >= 1 - TS.TIE for x in ratios)
    mean = sum(ratios) / len(ratios)
    return f"{name}: within 2% in {within}/{len(ratios)}, worst {min(ratios):.3f}, mean {mean:.3f}"


if __name__ == "__main__":
    main()
