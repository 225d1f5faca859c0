"""tune's search and plan replayed on an H100's figures (tests/data/h100/tune-grids): the grids of
cnn and transformer/small (adamw, B=4..1024, fp32/tf32/bf16/fp16, eager) are the surface, and a
simulated clock charges what the tunes there showed: 22 s before the first trial, 4 s for a
first trial that started its worker, half a second a trial after. On the device, at --budget
60s, tune measured fp32 alone (9 of 36) and picked x0.69 and x0.73 of the grids' best; replayed,
it measures every precision and names a configuration within the margin of the grid's best."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpubench.config.spec import Budget
from gpubench.science.leaders import MARGIN
from gpubench.tune import trial
from gpubench.tune.plan import Planner, TrialCost
from gpubench.tune.search import ROUNDS, Config, Space, Stop, search

GRIDS = json.loads((Path(__file__).parent / "data/h100/tune-grids/grids.json").read_text())
PRECISIONS = ("fp32", "bf16", "fp16", "tf32")  # space.PRECISION_ORDER
BATCHES = tuple(2**i for i in range(2, 11))
START_S, WORKER_S, FIXED_S = 22.0, 3.5, 0.1  # the recorded trace (tune.json, H100)


def replay(model: str, budget_s: float) -> tuple[Config | None, set[str], float]:
    """The search over the H100 grid of `model` on a simulated clock: its pick, the precisions
    it measured, and the clock when it ended."""
    surface = {(p, b): s for p, b, s in GRIDS[model]}
    space = Space(tuple((("precision", p), ("compile", "eager")) for p in PRECISIONS), BATCHES)
    sweep = Budget()
    limits = [trial.measuring_limit_s(trial.round_budget(sweep, r)) for r in range(ROUNDS)]
    clock = [START_S]
    planner = Planner(budget_s, lambda: clock[0], limits, 0.15, START_S)

    def measure(config: Config, rnd: int) -> float:
        left = planner.left_s()
        fixed = planner.fixed_s(config.combo, config.batch_size)
        if left is not None and left - fixed <= 0:
            raise Stop
        budget, _ = trial.bounded(trial.round_budget(sweep, rnd, planner.scale()), left - fixed)
        fresh = not planner.costs
        spent = FIXED_S + (WORKER_S if fresh else 0.0)
        measuring = trial.measuring_limit_s(budget)
        clock[0] += spent + measuring
        planner.observe(TrialCost(config.combo, rnd, spent, measuring, 0.0, planner.scale(),
                                  measuring, config.batch_size, fresh_worker=fresh))  # fmt: skip
        return surface[(dict(config.combo)["precision"], config.batch_size)]

    out = search(space, measure, pacer=planner)
    measured = {dict(t.config.combo)["precision"] for t in out.trials}
    return out.best, measured, clock[0]


@pytest.mark.parametrize("model", ["cnn", "transformer"])
def test_at_60_s_every_precision_is_measured_and_the_pick_is_the_grids_best(model: str) -> None:
    best, measured, ended = replay(model, 60.0)
    surface = {(p, b): s for p, b, s in GRIDS[model]}
    assert measured == set(PRECISIONS) and best is not None
    pick = surface[(dict(best.combo)["precision"], best.batch_size)]
    assert pick >= (1 - MARGIN) * max(surface.values())
    assert ended <= 60.0
