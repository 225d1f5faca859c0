"""tune's hand-written search against Optuna given the same problem like for like (issue 29):
the same ordered axes (the batch size as an ordered integer index of the powers of two, each
setting its own categorical), successive halving with the same reduction factor and rounds
(Optuna's SuccessiveHalvingPruner, and its HyperbandPruner over the same resources), the same
noisy figures, and the same budget in full-measurement units (a round-0 measurement costs 1/9 of
one, a round-1 one 1/3: search.round_scale), spent per seed as the hand-written search spent it.

Surfaces: the simulated ones of tests/test_tune_search.py, and real ones: a recorded grid's rows
as the truth (tests/data/acceptance: a configuration's samples/s is its row's; one that failed
cannot run), each measured with the rounds' noise. A search *finds* the answer where the
configuration it names is within MARGIN of the true best. Seeded and synthetic: nothing is
measured on this machine. Used by tests/test_tune_vs_optuna.py and scripts/tune_vs_optuna.py.

`replay` runs the hand-written search alone on a grid of the published tune-against-grid
comparison (V3) at a share of the grid's cost in full measurements, each row's own noise (its
interval) as the measurement's, to ask what the acceptance asks: is the pick within MARGIN of
the grid's best by the grid's own figures.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import test_tune_search as TS

from gpubench.tune.search import ETA, ROUNDS, Config, Space, round_scale, search

MARGIN = 0.03  # acceptance's practical difference (scripts/acceptance.py: science.leaders.MARGIN)
AXES = ("precision", "threads", "compile")  # the recorded grids' competing settings
DATA = Path(__file__).parent / "data" / "acceptance"
GRIDS = {"cnn": "cnn2/grid-cnn", "mlp": "tvg2/grid-mlp", "transformer": "tvg2/grid-transformer"}
# results/20261124-cpu-tune-vs-grid-v3's grids (trimmed copies in tests/data/acceptance/v3)
V3 = {m: f"v3/grid-{m}" for m in ("mlp", "cnn", "transformer")}
# Optuna's resource of a round: the measurement's length in round-0 units (1, 3, 9), so that
# a pruner's rungs (min_resource x reduction_factor^k) fall where the hand-written rounds end.
RESOURCE = tuple(ETA**r for r in range(ROUNDS))
# Asks in a row that measured nothing new (repeats, combinations outside the space) after which
# Optuna has settled on what it measured: its pick stands, the rest of the budget unspent.
SETTLED = 50


@dataclass(frozen=True)
class Problem:
    """A space and its true samples/s per configuration (None: it cannot run)."""

    name: str
    space: Space
    truth: Callable[[Config], float | None]

    def best(self) -> float:
        values = [
            self.truth(Config(c, b)) for c in self.space.combos for b in self.space.batch_sizes
        ]
        return max(v for v in values if v is not None)

    def found(self, pick: Config | None) -> bool:
        """The named configuration is within MARGIN of the true best."""
        value = None if pick is None else self.truth(pick)
        return value is not None and value >= (1 - MARGIN) * self.best()


def synthetic() -> list[Problem]:
    return [Problem(s.__name__, TS.SPACE, s) for s in (TS.rise_and_fall, TS.plateau, TS.cliff)]


def recorded(name: str, folder: str | None = None) -> Problem:
    """The grid `name` of GRIDS (or the grid in `folder` under DATA): its rows' samples/s as
    the truth (the last row of a configuration measured twice)."""
    rows = _rows(folder or GRIDS[name])
    table = {_config(r): _figure(r) for r in rows}
    return Problem(f"grid {name}", _space(rows), lambda c: table.get(c))


def _rows(folder: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / folder / "results.jsonl").open()]


def _config(row: dict[str, Any]) -> Config:
    return Config(tuple((a, row[a]) for a in AXES), int(row["batch_size"]))


def _figure(row: dict[str, Any]) -> float | None:
    ok = row["status"] == "ok" and row.get("samples_per_s")
    return float(row["samples_per_s"]) if ok else None


def _space(rows: list[dict[str, Any]]) -> Space:
    values = {v: sorted({r[v] for r in rows}, key=str) for v in AXES}
    combos = tuple(tuple(zip(AXES, c, strict=True)) for c in itertools.product(*values.values()))
    return Space(combos, tuple(sorted({int(r["batch_size"]) for r in rows})))


def replay(name: str, seed: int, share: float = 0.25) -> tuple[float | None, float]:
    """The hand-written search on V3's grid `name` with `share` of the grid's cost (one full
    measurement per row) to spend: each round's figure is the row's samples/s with the row's
    own spread (its 95% interval's half-width / 1.96 at the sweep's length, 1/sqrt(round_scale)
    times that at a round's). The grid's figure for the pick over the grid's best (None: no
    pick), and the full measurements spent."""
    rows = _rows(V3[name])
    table = {_config(r): (_figure(r), float(r.get("step_time_ci_rel") or 0.0) / 1.96) for r in rows}
    best = max(v for v, _ in table.values() if v is not None)
    rng = np.random.default_rng(seed)
    budget = share * len(rows)
    spent = [0.0]

    def measure(config: Config, rnd: int) -> float | None:
        spent[0] += round_scale(rnd)
        value, spread = table.get(config, (None, 0.0))
        sd = spread / math.sqrt(round_scale(rnd))
        return None if value is None else value * float(np.exp(rng.normal(0, sd)))

    def over() -> bool:
        return spent[0] + round_scale(ROUNDS - 1) > budget + 1e-9

    out = search(_space(rows), measure, over)
    pick = None if out.best is None else table[out.best][0]
    return (None if pick is None else pick / best), spent[0]


def noisy(problem: Problem, seed: int) -> Callable[[Config, int], float | None]:
    return TS.noisy(problem.truth, seed)


def hand(problem: Problem, seed: int) -> tuple[Config | None, float]:
    """The hand-written search's pick and what it spent, in full measurements."""
    out = search(problem.space, noisy(problem, seed))
    return out.best, sum(round_scale(t.round) for t in out.trials)


def pruner(kind: str) -> optuna.pruners.BasePruner:
    if kind == "sh":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=ETA)
    if kind == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=1, max_resource=RESOURCE[-1], reduction_factor=ETA
        )
    raise ValueError(f"pruner {kind!r}: expected 'sh' or 'hyperband'")


def sampler(kind: str, seed: int) -> optuna.samplers.BaseSampler:
    if kind == "tpe":  # Optuna 5's default TPE models the axes jointly (multivariate)
        return optuna.samplers.TPESampler(seed=seed)
    if kind == "tpe-indep":  # each axis on its own (multivariate=False)
        return optuna.samplers.TPESampler(seed=seed, multivariate=False)
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"sampler {kind!r}: expected 'tpe', 'tpe-indep' or 'random'")


def rival(problem: Problem, seed: int, budget: float, how: str) -> Config | None:
    """Optuna's pick (`how`: "SAMPLER+PRUNER", e.g. "tpe+sh") after `budget` full measurements:
    the configuration with the best figure at the longest measurement any trial reached. A
    configuration Optuna asks for again reuses its figures for the rounds already measured, at
    no cost (the hand-written search never measures one twice in a round; Optuna is not charged
    for asking twice)."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    s, p = how.split("+")
    # a fixed name: HyperbandPruner assigns a trial's bracket from a hash of the study's name
    name = f"{problem.name} {seed} {how}"
    study = optuna.create_study(
        study_name=name, direction="maximize", sampler=sampler(s, seed), pruner=pruner(p)
    )
    measure = noisy(problem, seed)
    space = problem.space
    settings = {a: sorted({dict(c)[a] for c in space.combos}, key=str) for a, _ in space.combos[0]}
    spent = 0.0
    best: tuple[int, float, Config] | None = None  # (round, figure, config)
    seen: dict[tuple[Config, int], float | None] = {}
    idle = 0  # asks in a row that measured nothing new
    while spent + round_scale(0) <= budget + 1e-9 and idle < SETTLED:
        idle += 1
        trial = study.ask()
        combo = tuple((a, trial.suggest_categorical(a, v)) for a, v in settings.items())
        if combo not in space.combos:  # a combination the space leaves out: nothing to measure
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        index = trial.suggest_int("batch_index", 0, len(space.batch_sizes) - 1)
        config = space.config(combo, space.batch_sizes[index])
        state, value = optuna.trial.TrialState.COMPLETE, None
        for rnd in range(ROUNDS):
            if (config, rnd) not in seen:
                if spent + round_scale(rnd) > budget + 1e-9:
                    state = optuna.trial.TrialState.PRUNED
                    break
                spent += round_scale(rnd)
                seen[config, rnd] = measure(config, rnd)
                idle = 0
            value = seen[config, rnd]
            if value is None:
                state = optuna.trial.TrialState.FAIL
                break
            if best is None or (rnd, value) > best[:2]:
                best = (rnd, value, config)
            trial.report(value, RESOURCE[rnd])
            if rnd < ROUNDS - 1 and trial.should_prune():
                state = optuna.trial.TrialState.PRUNED
                break
        if state == optuna.trial.TrialState.COMPLETE:
            study.tell(trial, value)
        else:
            study.tell(trial, state=state)
    return None if best is None else best[2]


RIVALS = ("tpe+sh", "tpe-indep+sh", "tpe+hyperband", "random+sh")


@dataclass(frozen=True)
class Tally:
    """How often each search named a configuration within MARGIN of the true best, over
    `seeds`, and the mean budget spent (full measurements)."""

    problem: str
    seeds: int
    found: dict[str, int]
    budget: float

    def line(self) -> str:
        said = ", ".join(f"{k} {v}/{self.seeds}" for k, v in self.found.items())
        return f"{self.problem}: budget {self.budget:.1f} full measurements; within 3%: {said}"


def compare(problem: Problem, seeds: Iterable[int], rivals: Iterable[str] = RIVALS) -> Tally:
    """Each search on `problem` over `seeds`, every rival given the hand-written search's spend
    for the same seed."""
    seeds = list(seeds)
    rivals = list(rivals)
    found = dict.fromkeys(["hand-written", *rivals], 0)
    spent = []
    for seed in seeds:
        pick, cost = hand(problem, seed)
        spent.append(cost)
        found["hand-written"] += problem.found(pick)
        for how in rivals:
            found[how] += problem.found(rival(problem, seed, cost, how))
    return Tally(problem.name, len(seeds), found, math.fsum(spent) / len(seeds))
