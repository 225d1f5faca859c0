"""What the confirmation (run.confirm over harness.interleave) will take after a search, from
what the search measured: its likely candidates' step times, warm-ups and set-up (a repeated
trial's fixed cost: a worker, the build, a first step whose compile the cache holds), and the
rounds its budget buys, counted as run.confirm and harness.interleave count them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpubench.harness.interleave import WARMUP_SHARE
from gpubench.run import confirm
from gpubench.science import leaders


@dataclass(frozen=True)
class Candidate:
    """One configuration the confirmation is expected to re-measure: its median step time, its
    warm-up (seconds after the first step, as its trial measured it; inf where its trial's
    limit ended it unsteady: the confirmation's own limit ends it) and its set-up (the fixed
    cost of measuring it again)."""

    step_s: float
    warmup_s: float
    setup_s: float


def confirmation_s(candidates: Sequence[Candidate], point_s: float) -> float:
    """Seconds the confirmation of `candidates` takes after points that took `point_s` seconds
    in all: the set-up (each candidate's, its warm-up up to interleave's share of the budget)
    and the interleaved rounds, as many as the budget (run.confirm.SHARE of `point_s`) buys,
    at least leaders.MIN_ROUNDS of one-step windows, at most confirm.MAX_ROUNDS, none begun
    after confirm.DEADLINE times the budget. 0 with fewer than two candidates (not needed)."""
    if len(candidates) < 2:
        return 0.0
    k = len(candidates)
    budget = max(confirm.SHARE * point_s, confirm.MIN_BUDGET_S)
    warm = sum(min(c.warmup_s, WARMUP_SHARE * budget / k) for c in candidates)
    setup = sum(c.setup_s for c in candidates) + warm
    switch = sum(c.step_s for c in candidates)  # each window's untimed first step
    fit = int(budget / (confirm.WINDOW_S * k + switch)) if switch > 0 else confirm.MAX_ROUNDS
    rounds = min(max(fit, leaders.MIN_ROUNDS), confirm.MAX_ROUNDS)
    window = confirm.WINDOW_S
    if fit < leaders.MIN_ROUNDS:
        window = max(budget / leaders.MIN_ROUNDS - switch, 0.0) / k
    per_round = sum(max(window, c.step_s) for c in candidates) + switch
    # no round starts after DEADLINE x the budget: at most one round past it
    return setup + min(rounds * per_round, confirm.DEADLINE * budget + per_round)
