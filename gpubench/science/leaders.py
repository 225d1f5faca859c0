"""Which measured configurations could be the fastest, and whether an interleaved re-measurement
shows one of them ahead: pure functions of rows and of rounds of samples/s (run.confirm takes
the measurements, science.verdict states the answer).

A row's samples/s is known to within the 95% confidence interval of its median step time
(`step_time_ci_rel`). The leader's *candidates* are the rows whose intervals overlap the
leader's, and the runner-up: any of them could be the fastest. They are re-measured in rounds,
one short window each per round, in rotating order, so that whatever else the machine does in
those minutes falls on all of them alike. For the leader of the rounds and each other candidate
the per-round ratio of their samples/s is a paired sample, and the same ratios pick the leader
(the candidate whose median per-round ratio over each other is highest, never the higher median
samples/s alone: two statistics could name a leader at x0.90 over what it leads); its lead over
a candidate *holds* when the distribution-free 95% interval of the median ratio (a sign test's:
scipy's `quantile_test`) lies above 1 + MARGIN, the practical difference. A winner is named only
where its lead holds over every candidate; the others are tied with it, and the interval says
how:

- the interval lies within the margin on both sides: equivalent (no practical difference);
- its lower bound is above 1 but not above 1 + MARGIN: ahead, but perhaps by less than the
  margin (a 1-10% lead at a 3% margin is neither a clear win nor shown to be equivalent);
- its lower bound is at or below 1: the rounds cannot tell which is faster.

The rounds run in PROCESSES fresh worker processes in turn (run.confirm), since one
configuration can run 17-38% apart in two processes (another memory layout, another worker
state) and a window's interval within one process cannot see that. Every interval here covers
the spread between the processes (as pyperf reports the spread between its processes): the
sign test's interval over all rounds, widened where needed to the medians each process measured
on its own. A row whose re-measured figure falls outside its own interval is *unstable*: its
interval did not hold in another process.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from gpubench.harness.step_stats import Stats, min_samples_for_ci

CONFIDENCE = 0.95
MAX_CANDIDATES = 4  # the leader and up to 3 contenders are re-measured
MIN_ROUNDS = min_samples_for_ci(CONFIDENCE)  # 6: the fewest with an interval of the median
# Fresh worker processes the rounds run in, and the fewest rounds each runs: together MIN_ROUNDS.
PROCESSES = 2
ROUNDS_PER_PROCESS = math.ceil(MIN_ROUNDS / PROCESSES)
# A sweep measures its points minutes apart, and a machine's pace drifts between them by more
# than one point's interval says (two quiet default sweeps here: the same point 10-30% apart):
# a row within this share of the leader's interval is a candidate too.
DRIFT = 0.1
# The practical difference: a lead smaller than this share is no lead worth naming, whatever a
# test says (a 0.05% lead held over the rounds is real and useless). `explain --margin` and the
# `margin` arguments below change it.
MARGIN = 0.03


def check_margin(margin: float) -> float:
    """`margin` itself where it is a share in [0, 1); a ValueError naming it otherwise."""
    if not (isinstance(margin, int | float) and 0 <= float(margin) < 1):
        raise ValueError(
            f"invalid margin {margin!r}; allowed: a share from 0 up to (not including) 1, "
            "e.g. 0.03 for 3% (explain --margin takes percent: 0 up to 100)"
        )
    return float(margin)


def interval(row: dict[str, Any]) -> tuple[float, float]:
    """The 95% interval of a row's samples/s, from its step time's (from the raw step times
    where the row predates `step_time_ci_rel`), never wider than the range of the raw step
    times it kept (the median's interval lies between two of them). A row with too few steps
    for an interval is placed by that range, and one that kept none by its median alone: a row
    clearly slower by its figures never reads as possibly the fastest for lack of an interval."""
    sps = float(row["samples_per_s"])
    ci = row.get("step_time_ci_rel")
    times = row.get("step_times_s")
    kept = [float(t) for t in times if t and t > 0] if isinstance(times, list) else []
    if (ci is None or (isinstance(ci, float) and math.isnan(ci))) and len(kept) >= MIN_ROUNDS:
        ci = Stats.of(kept).ci_rel
    low, high = 0.0, math.inf
    if ci is not None and math.isfinite(float(ci)) and float(ci) < 1:
        low, high = sps / (1 + float(ci)), sps / (1 - float(ci))
    if kept:
        # samples/s over the range of the step times, scaled to the row's own median figure
        step = float(row.get("step_time_s") or float(np.median(kept)))
        low, high = max(low, sps * step / max(kept)), min(high, sps * step / min(kept))
    elif math.isinf(high):
        low, high = sps, sps
    return min(low, sps), max(high, sps)


def _within(row: dict[str, Any], top: dict[str, Any], margin: float) -> bool:
    """`row` could be the fastest beside `top` (the fastest by its figure): its interval
    reaches top's widened by DRIFT, or its figure is within `margin` of top's."""
    reach = interval(row)[1] >= interval(top)[0] * (1 - DRIFT)
    return reach or float(row["samples_per_s"]) * (1 + margin) >= float(top["samples_per_s"])


def candidates(rows: list[dict[str, Any]], margin: float = MARGIN) -> list[dict[str, Any]]:
    """The rows that could be the fastest, fastest first: the leader, every row whose interval
    reaches the leader's widened by DRIFT or whose figure is within `margin` of it, and the
    runner-up (run.confirm re-measures the first MAX_CANDIDATES whatever its budget; tune's
    plan the ones its budget affords, affordable())."""
    ranked = sorted(rows, key=lambda r: -float(r["samples_per_s"]))
    if len(ranked) < 2:
        return ranked
    return ranked[:2] + [r for r in ranked[2:] if _within(r, ranked[0], margin)]


# What re-measuring one candidate costs beyond its rounds, in its own steps, in each process:
# building it and warming it up (harness.interleave runs at least two steps: the first creates
# its state).
SETUP_STEPS = 2


def affordable(chosen: list[dict[str, Any]], budget_s: float) -> list[dict[str, Any]]:
    """The candidates (fastest first; MAX_CANDIDATES at most) that MIN_ROUNDS rounds of
    one-step windows, with their set-up, can re-measure within `budget_s` seconds, by their
    rows' median step times: the closest contenders kept, the farthest dropped; [] where not
    even the leader and the runner-up fit."""
    most = min(len(chosen), MAX_CANDIDATES)
    fits = [n for n in range(2, most + 1) if cost_s(chosen[:n]) <= budget_s]
    return chosen[: max(fits)] if fits else []


def cost_s(chosen: list[dict[str, Any]]) -> float:
    """Seconds MIN_ROUNDS rounds of one-step windows (ROUNDS_PER_PROCESS in each of PROCESSES
    processes) and the set-up of `chosen` in each process take, by their rows' median step
    times (what affordable() weighs)."""
    steps = SETUP_STEPS * PROCESSES + ROUNDS_PER_PROCESS * PROCESSES
    return steps * sum(float(r["step_time_s"]) for r in chosen)


@dataclass(frozen=True)
class Comparison:
    """The leader against one candidate over the rounds: the median of the per-round ratios of
    their samples/s (leader over candidate) and its 95% interval."""

    candidate: int
    ratio: float
    low: float
    high: float

    def holds(self, margin: float = MARGIN) -> bool:
        """The leader is ahead of this candidate by more than `margin` at 95% confidence."""
        return self.low > 1.0 + margin

    def reading(self, margin: float = MARGIN) -> str:
        """What the interval says at `margin`: "ahead" (by more than the margin), "equivalent"
        (within the margin either way), "ahead, perhaps by less than the margin", or "cannot
        tell" (it reaches 1)."""
        if self.holds(margin):
            return "ahead"
        if self.high <= 1.0 + margin and self.low >= 1.0 / (1.0 + margin):
            return "equivalent"
        if self.low > 1.0:
            return "ahead, perhaps by less than the margin"
        return "cannot tell"


@dataclass(frozen=True)
class Decision:
    """The outcome of the rounds. `leader` is the candidate whose median per-round ratio over
    each other candidate is at least 1 (leader_of; the higher median samples/s among several);
    `winner` is it where its lead holds (by more than `margin`) over every other candidate,
    else None; `tied` are the candidates it could not be told from by that much (itself first;
    empty when there is a winner)."""

    rounds: int
    leader: int
    winner: int | None
    tied: list[int]
    comparisons: list[Comparison] = field(default_factory=list)
    median_samples_per_s: list[float] = field(default_factory=list)
    margin: float = MARGIN
    # the rounds each process ran, in order (one process: [rounds]); each candidate's figure's
    # interval over them, covering the spread between the processes
    processes: list[int] = field(default_factory=list)
    low_samples_per_s: list[float] = field(default_factory=list)
    high_samples_per_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Decision:
        """The decision as recorded (a record from before the margin decided at margin 0)."""
        comps = [Comparison(**c) for c in d.get("comparisons", [])]
        return Decision(
            int(d["rounds"]),
            int(d["leader"]),
            None if d.get("winner") is None else int(d["winner"]),
            [int(i) for i in d.get("tied", [])],
            comps,
            [float(x) for x in d.get("median_samples_per_s", [])],
            float(d.get("margin") or 0.0),
            [int(n) for n in d.get("processes", [])],
            [float(x) for x in d.get("low_samples_per_s", [])],
            [float(x) for x in d.get("high_samples_per_s", [])],
        )

    def at(self, margin: float) -> Decision:
        """The same rounds decided at `margin`: the winner and the tie from the comparisons."""
        d = _settle(self.rounds, self.leader, self.comparisons, self.median_samples_per_s, margin)
        return replace(
            d,
            processes=self.processes,
            low_samples_per_s=self.low_samples_per_s,
            high_samples_per_s=self.high_samples_per_s,
        )


def decide(
    samples: list[list[float]], margin: float = MARGIN, processes: list[int] | None = None
) -> Decision:
    """Decide from `samples[c][r]`, candidate c's samples/s in round r (every candidate measured
    in every round), at the practical difference `margin`; `processes`: how many of the rounds,
    in order, each worker process ran (None: one ran them all). Every interval covers the spread
    between the processes (spread()). Needs at least MIN_ROUNDS rounds and two candidates."""
    check_margin(margin)
    x = np.asarray(samples, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < MIN_ROUNDS:
        raise ValueError(f"need at least 2 candidates and {MIN_ROUNDS} rounds, got shape {x.shape}")
    if not np.all(np.isfinite(x)) or np.any(x <= 0):
        raise ValueError("samples/s must be finite and positive")
    groups = [x.shape[1]] if processes is None else [int(n) for n in processes]
    if sum(groups) != x.shape[1] or any(n < 1 for n in groups):
        raise ValueError(f"processes {processes} do not split the {x.shape[1]} rounds")
    medians = np.median(x, axis=1)
    leader = leader_of(x, medians.tolist())
    comps = [_compare(x[leader], x[c], c, groups) for c in range(x.shape[0]) if c != leader]
    figures = [spread(list(row), groups) for row in x]
    return replace(
        _settle(x.shape[1], leader, comps, medians.tolist(), margin),
        processes=groups,
        low_samples_per_s=[f[1] for f in figures],
        high_samples_per_s=[f[2] for f in figures],
    )


def leader_of(x: np.ndarray, medians: list[float]) -> int:
    """The candidate (a row of `x`, samples/s per round) whose smallest median per-round ratio
    over another candidate (the statistic a Comparison quotes) is highest, then the higher
    median samples/s: whenever a candidate is at least x1 over every other by the rounds, the
    leader is one (its every Comparison reads x1 or more). Only where the ratios run in a
    circle (a over b, b over c, c over a) is there none, and the leader is the one that trails
    least."""
    n = x.shape[0]
    worst = [min(float(np.median(x[c] / x[o])) for o in range(n) if o != c) for c in range(n)]
    return max(range(n), key=lambda c: (worst[c], medians[c]))


def recorded(partition: dict[str, Any], margin: float = MARGIN) -> Decision:
    """A confirmation record's (confirm.json partition's) decision at `margin`: decided again
    from its rounds (`samples_per_s`, `processes`) where it kept them, so that a record written
    when the higher median samples/s picked the leader reads by the ratios as well; as
    recorded otherwise."""
    samples, processes = partition.get("samples_per_s"), partition.get("processes")
    if samples and len(samples) >= 2 and all(len(s) >= MIN_ROUNDS for s in samples):
        return decide(samples, margin, processes)
    return Decision.from_dict(partition["decision"]).at(margin)


def _settle(
    rounds: int, leader: int, comps: list[Comparison], medians: list[float], margin: float
) -> Decision:
    check_margin(margin)
    if all(c.holds(margin) for c in comps):
        return Decision(rounds, leader, leader, [], comps, medians, margin)
    tied = [leader] + [c.candidate for c in comps if not c.holds(margin)]
    return Decision(rounds, leader, None, tied, comps, medians, margin)


def spread(values: list[float], processes: list[int]) -> tuple[float, float, float]:
    """The median of `values` (rounds in order, `processes[k]` of them from process k) and its
    95% interval between processes: the sign test's over all of them, widened to the median of
    each process's own rounds where one lies outside it (so it never claims more than the
    processes agree on)."""
    from scipy import stats  # a second and a half to import: not for the command line's parser

    v = np.asarray(values, dtype=float)
    ci = stats.quantile_test(v, q=float(np.median(v)), p=0.5).confidence_interval(CONFIDENCE)
    low, high = float(ci.low), float(ci.high)
    # a sign test's bound is an order statistic, or +-inf where too few rounds give none
    low = float(v.min()) if not math.isfinite(low) else low
    high = float(v.max()) if not math.isfinite(high) else high
    edges = np.cumsum([0, *processes])
    each = [float(np.median(v[a:b])) for a, b in itertools.pairwise(edges)]
    return float(np.median(v)), min([low, *each]), max([high, *each])


def _compare(
    lead: np.ndarray, other: np.ndarray, index: int, processes: list[int] | None = None
) -> Comparison:
    """The median per-round ratio and its distribution-free 95% interval: the sign test's
    (the order statistics a Binomial(n, 1/2) allows; every candidate of a round shares that
    round's machine, so the ratio pairs them), widened to each process's own median ratio."""
    ratio, low, high = spread(list(lead / other), processes or [len(lead)])
    return Comparison(index, ratio, low, high)


def unstable(row: dict[str, Any], remeasured_samples_per_s: float) -> bool:
    """Whether `row`'s interval (interval()) misses the samples/s its configuration was
    re-measured at: its interval did not hold in other processes."""
    low, high = interval(row)
    return not (low <= remeasured_samples_per_s <= high)


def by_intervals(rows: list[dict[str, Any]], margin: float = MARGIN) -> list[dict[str, Any]]:
    """Without a re-measurement: the rows whose samples/s interval reaches the leader's widened
    by DRIFT, or whose figure is within `margin` of the leader's (the leader first), as
    candidates() chooses them. One row: a clear leader."""
    ranked = sorted(rows, key=lambda r: -float(r["samples_per_s"]))
    return [ranked[0]] + [r for r in ranked[1:] if _within(r, ranked[0], margin)]


def bound(top: dict[str, Any], row: dict[str, Any]) -> float:
    """The most `top` could be ahead of `row` by their intervals: top's upper bound over row's
    lower, less 1 (inf where row's lower bound is 0)."""
    low = interval(row)[0]
    return math.inf if low <= 0 else interval(top)[1] / low - 1
