"""Which measured configurations could be the fastest, and whether an interleaved re-measurement
shows one of them ahead: pure functions of rows and of rounds of samples/s (run.confirm takes
the measurements, science.verdict states the answer).

A row's samples/s is known to within the 95% confidence interval of its median step time
(`step_time_ci_rel`). The leader's *candidates* are the rows whose intervals overlap the
leader's, and the runner-up: any of them could be the fastest. They are re-measured in rounds,
one short window each per round, in rotating order, so that whatever else the machine does in
those minutes falls on all of them alike. For the leader of the rounds and each other candidate
the per-round ratio of their samples/s is a paired sample; the leader's lead over a candidate
*holds* when the distribution-free 95% interval of the median ratio lies above 1. A winner is
named only where its lead holds over every candidate; otherwise the candidates whose interval
reaches 1 are tied with it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gpubench.harness.timing import Stats, median_ci_indices, min_samples_for_ci

CONFIDENCE = 0.95
MAX_CANDIDATES = 4  # the leader and up to 3 contenders are re-measured
MIN_ROUNDS = min_samples_for_ci(CONFIDENCE)  # 6: the fewest with an interval of the median
# A sweep measures its points minutes apart, and a machine's pace drifts between them by more
# than one point's interval says (two quiet default sweeps here: the same point 10-30% apart):
# a row within this share of the leader's interval is a candidate too.
DRIFT = 0.1


def interval(row: dict[str, Any]) -> tuple[float, float]:
    """The 95% interval of a row's samples/s, from its step time's (0, inf where it has none;
    from the raw step times where the row predates `step_time_ci_rel`)."""
    sps = float(row["samples_per_s"])
    ci = row.get("step_time_ci_rel")
    times = row.get("step_times_s")
    if (ci is None or (isinstance(ci, float) and math.isnan(ci))) and isinstance(times, list):
        ci = Stats.of([float(t) for t in times]).ci_rel if times else None
    if ci is None or not math.isfinite(float(ci)) or float(ci) >= 1:
        return 0.0, math.inf
    return sps / (1 + float(ci)), sps / (1 - float(ci))


def candidates(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows that could be the fastest, fastest first: the leader, every row whose interval
    reaches the leader's widened by DRIFT, and the runner-up (affordable() picks the ones a
    budget re-measures)."""
    ranked = sorted(rows, key=lambda r: -float(r["samples_per_s"]))
    if len(ranked) < 2:
        return ranked
    low = interval(ranked[0])[0] * (1 - DRIFT)
    chosen = [ranked[0], ranked[1]]
    chosen += [r for r in ranked[2:] if interval(r)[1] >= low]
    return chosen


# What re-measuring one candidate costs beyond its rounds, in its own steps: building it and
# warming it up (harness.interleave runs at least two steps: the first creates its state).
SETUP_STEPS = 2


def affordable(chosen: list[dict[str, Any]], budget_s: float) -> list[dict[str, Any]]:
    """The candidates (fastest first; MAX_CANDIDATES at most) that MIN_ROUNDS rounds of
    one-step windows, with their set-up, can re-measure within `budget_s` seconds, by their
    rows' median step times: the closest contenders kept, the farthest dropped; [] where not
    even the leader and the runner-up fit."""
    for n in range(min(len(chosen), MAX_CANDIDATES), 1, -1):
        steps = sum(float(r["step_time_s"]) for r in chosen[:n])
        if (SETUP_STEPS + MIN_ROUNDS) * steps <= budget_s:
            return chosen[:n]
    return []


def cost_s(chosen: list[dict[str, Any]]) -> float:
    """Seconds MIN_ROUNDS rounds of one-step windows and the set-up of `chosen` take, by their
    rows' median step times (what affordable() weighs)."""
    return (SETUP_STEPS + MIN_ROUNDS) * sum(float(r["step_time_s"]) for r in chosen)


@dataclass(frozen=True)
class Comparison:
    """The leader against one candidate over the rounds: the median of the per-round ratios of
    their samples/s (leader over candidate) and its 95% interval."""

    candidate: int
    ratio: float
    low: float
    high: float

    @property
    def holds(self) -> bool:
        """The leader is ahead of this candidate at 95% confidence."""
        return self.low > 1.0


@dataclass(frozen=True)
class Decision:
    """The outcome of the rounds. `leader` is the candidate with the highest median samples/s;
    `winner` is it where its lead holds over every other candidate, else None; `tied` are the
    candidates it could not be told from (itself first; empty when there is a winner)."""

    rounds: int
    leader: int
    winner: int | None
    tied: list[int]
    comparisons: list[Comparison] = field(default_factory=list)
    median_samples_per_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Decision:
        comps = [Comparison(**c) for c in d.get("comparisons", [])]
        return Decision(
            int(d["rounds"]),
            int(d["leader"]),
            None if d.get("winner") is None else int(d["winner"]),
            [int(i) for i in d.get("tied", [])],
            comps,
            [float(x) for x in d.get("median_samples_per_s", [])],
        )


def decide(samples: list[list[float]]) -> Decision:
    """Decide from `samples[c][r]`, candidate c's samples/s in round r (every candidate measured
    in every round). Needs at least MIN_ROUNDS rounds and two candidates."""
    x = np.asarray(samples, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < MIN_ROUNDS:
        raise ValueError(f"need at least 2 candidates and {MIN_ROUNDS} rounds, got shape {x.shape}")
    if not np.all(np.isfinite(x)) or np.any(x <= 0):
        raise ValueError("samples/s must be finite and positive")
    medians = np.median(x, axis=1)
    leader = int(np.argmax(medians))
    comps = [_compare(x[leader], x[c], c) for c in range(x.shape[0]) if c != leader]
    if all(c.holds for c in comps):
        return Decision(x.shape[1], leader, leader, [], comps, medians.tolist())
    tied = [leader] + [c.candidate for c in comps if not c.holds]
    return Decision(x.shape[1], leader, None, tied, comps, medians.tolist())


def _compare(lead: np.ndarray, other: np.ndarray, index: int) -> Comparison:
    ratios = np.sort(lead / other)
    lo, hi = median_ci_indices(len(ratios), CONFIDENCE) or (0, len(ratios) - 1)
    return Comparison(index, float(np.median(ratios)), float(ratios[lo]), float(ratios[hi]))


def by_intervals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without a re-measurement: the rows whose samples/s interval reaches the leader's widened
    by DRIFT (the leader first), as candidates() chooses them. One row: a clear leader."""
    ranked = sorted(rows, key=lambda r: -float(r["samples_per_s"]))
    low = interval(ranked[0])[0] * (1 - DRIFT)
    return [ranked[0]] + [r for r in ranked[1:] if interval(r)[1] >= low]
