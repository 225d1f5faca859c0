"""The one batch-growth rule: which batch a series measures next, or why it stops, from the rows
it measured so far and its time budget. A series is the points that differ only in batch size;
the default sweep (on every device), `--batch-sizes auto` and the verdict's wording of "a larger
batch" all ask this function, so what a run measured and what its verdict says cannot drift.

The rule (docs/method.md, "Growing a batch-size series"):

- grow while the largest batch is the fastest and its throughput rose over the batch below it by
  more than the noise (NOISE_FLOOR, or the two rows' 95% intervals where wider): twice the
  largest, or LAUNCH_STEP times where the step time stayed flat (launch-bound: the step time grew
  by a power of the batch under LAUNCH_EXPONENT, so a doubling would be another flat point);
- where throughput flattened (the largest is no faster than the one below it beyond the noise,
  or a smaller batch is the fastest), refine near the knee: the smallest batch within the noise
  of the fastest gets a measured neighbour below it at most twice smaller, then the series stops;
- stop where memory ends (an `oom` row above the fastest), a batch fails, the ceiling is reached,
  the series' `budget_s` (seconds of its points' wall time) is spent, or the next probe would
  take longer than the budget has left (a probe that would not fit is not started).

Every decision is a pure function of the rows (their `batch_size`, `status`, `samples_per_s`,
`step_time_s`, `step_time_ci_rel`, `point_time_s`): tested on recorded H100 and CPU rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpubench.science.partition import figure
from gpubench.science.standing import positive, ran
from gpubench.store import wording

if TYPE_CHECKING:
    from gpubench.science.leaders import Comparison

# Throughput must rise by more than this share to count as rising: a row's own interval covers
# the steps of one window in one process, not the variation between worker processes (DESIGN
# section 4), so an interval narrower than this does not make a smaller rise real.
NOISE_FLOOR = 0.05
# The step time grew as batch**e with e under this: launch-bound (flat), so jump LAUNCH_STEP-fold.
LAUNCH_EXPONENT = 0.25
LAUNCH_STEP = 4
# 64 grows to 65,536 at the most, where max-batch's search stops too (run.maxbatch.CEILING).
CEILING = 2**16
# Seconds of its points' wall time (point_time_s, listed points included) each series may take,
# by device type. The default suite on this project's 2-core AVX2 CPU (bf16 left out there as
# emulated: config.precision): 6 fp32 series, which at 8 s left mlp/small still rising at
# B=512-1024 (results/20261128-cpu-default-final); on an H100 a replay of the recorded rows
# brackets every CUDA series in at most 10.4 s (tests/test_batch_growth.py), 12 series within
# about two minutes.
SERIES_BUDGET_S = {"cpu": 12.0, "cuda": 12.0}
# `--batch-sizes auto`: one series is what the user asked for, so it may take longer.
AUTO_BUDGET_S = {"cpu": 30.0, "cuda": 30.0}
# A point whose step time is predicted from the two largest rows is never assumed to grow more
# slowly than its batch over this (a jump past a flat stretch may land on the knee).
_SLOPE_FLOOR = 1 / 8


@dataclass(frozen=True)
class Growth:
    """The rule's decision for one series: `batch`, the next batch to measure (None: the series
    stops); `reason`, one of "rising", "launch-bound", "refine" (a next batch), "flattened",
    "memory ends" (bracketed), "failed", "ceiling", "budget spent", "over budget" (stopped
    unanswered); `detail`, the figures behind it in words."""

    batch: int | None
    reason: str
    detail: str


def decide(
    rows: Sequence[dict[str, Any]], budget_s: float | None = None, ceiling: int = CEILING
) -> Growth:
    """The next batch of the series `rows` (any order, one seed), or why it stops (see the
    module's docstring). `budget_s`: seconds of the points' wall time (`point_time_s`) the
    series may take in all (None: unbounded); `ceiling`: the largest batch it may measure.
    The batch it names is never one the rows hold (a series cannot loop)."""
    decided = _decide(rows, budget_s, ceiling)
    if decided.batch is not None and decided.batch in {_b(r) for r in rows}:
        # a batch measured already (one that failed inside the series): nothing new to learn
        return Growth(None, "failed", f"B={decided.batch} measured already: {decided.detail}")
    return decided


def _decide(rows: Sequence[dict[str, Any]], budget_s: float | None, ceiling: int) -> Growth:
    measured = {int(r["batch_size"]) for r in rows}
    ok = sorted((r for r in rows if ran(r)), key=lambda r: int(r["batch_size"]))
    if not ok:
        return Growth(None, "failed", "no batch of the series ran")
    top = ok[-1]
    above = sorted((r for r in rows if int(r["batch_size"]) > int(top["batch_size"])), key=_b)
    best = max(ok, key=_rate)
    knee = _knee(ok, best)
    spent = sum(seconds(r) for r in rows)
    if above and above[0].get("status") != "oom":
        failed = above[0]
        return Growth(None, "failed", f"B={_b(failed)} ended {failed.get('status')}")
    if above or best is not top or _flat(ok):
        refine = _refinement(ok, knee, above[0] if above else None, measured)
        if refine is not None:
            cost = predicted_s(ok, refine)
            if budget_s is None or spent + cost <= budget_s:
                return Growth(refine, "refine", f"between B={_below(ok, knee)} and B={_b(knee)}")
        if above:
            return Growth(None, "memory ends", f"B={_b(above[0])} ran out of memory")
        return Growth(None, "flattened", _flattened_words(ok, best))
    if _b(top) >= ceiling:
        return Growth(None, "ceiling", f"B={_b(top)} is the ceiling, still the fastest")
    launch = len(ok) >= 2 and _exponent(ok[-2], top) < LAUNCH_EXPONENT
    rising = _rising_words(ok)
    if _overshot(ok):
        # a jump past a flat stretch landed beyond the knee (the step time grew, throughput
        # rose by less than the square root of the jump): measure inside it before going on
        mid = _middle(_b(ok[-2]), _b(top))
        if budget_s is None or spent + predicted_s(ok[:-1], mid) <= budget_s:
            return Growth(mid, "refine", f"between B={_b(ok[-2])} and B={_b(top)}")
    for factor in (LAUNCH_STEP, 2) if launch else (2,):
        nxt = min(_b(top) * factor, ceiling)
        cost = predicted_s(ok, nxt)
        if budget_s is None or spent + cost <= budget_s:
            reason = "launch-bound" if factor > 2 else "rising"
            return Growth(nxt, reason, rising)
    if budget_s is not None and spent >= budget_s:
        return Growth(
            None,
            "budget spent",
            f"{rising}; {wording.seconds(spent)} of its {wording.seconds(budget_s)} spent",
        )
    nxt = min(_b(top) * 2, ceiling)
    return Growth(
        None,
        "over budget",
        f"{rising}; B={nxt} would take about {wording.seconds(predicted_s(ok, nxt))}, "
        f"{wording.seconds(max(budget_s or 0.0, 0.0) - spent)} of its "
        f"{wording.seconds(budget_s)} left",
    )


def flattened(rows: Sequence[dict[str, Any]]) -> str | None:
    """Where throughput flattened in the series `rows`, in words (None: the largest that ran is
    the fastest and still rose beyond the noise, or nothing ran): a larger batch measured no
    faster than the fastest, beyond the noise."""
    ok = sorted((r for r in rows if ran(r)), key=_b)
    if not ok:
        return None
    best = max(ok, key=_rate)
    if best is not ok[-1] or _flat(ok):
        return _flattened_words(ok, best)
    return None


def overturned(rows: Sequence[dict[str, Any]], rounds: Comparison | None, margin: float) -> bool:
    """Whether a re-measurement that found the largest batch of the series `rows` the fastest
    leaves the series unbracketed: its rows read it flattened with a smaller batch the fastest,
    and the interleaved rounds' comparison of the largest with that one (`rounds`, None where
    they did not compare the two) is not a tie at `margin`. The verdict's "larger batches not
    measured" and the sweep's growth after its confirmation both ask this."""
    ok = sorted((r for r in rows if ran(r)), key=_b)
    if not ok or flattened(ok) is None or max(ok, key=_rate) is ok[-1]:
        return False
    return rounds is None or rounds.holds(margin)


def noise(a: dict[str, Any], b: dict[str, Any]) -> float:
    """The share by which two rows' throughputs must differ to differ: their 95% intervals
    together, at least NOISE_FLOOR."""
    return max(NOISE_FLOOR, _ci(a) + _ci(b))


def _flat(ok: list[dict[str, Any]]) -> bool:
    """Whether the largest ran no faster than the batch below it, beyond the noise."""
    if len(ok) < 2:
        return False
    prev, top = ok[-2], ok[-1]
    return _rate(top) <= _rate(prev) * (1 + noise(prev, top))


def _knee(ok: list[dict[str, Any]], best: dict[str, Any]) -> dict[str, Any]:
    """The smallest batch within the noise of the fastest: where throughput flattens."""
    return next(r for r in ok if _rate(r) * (1 + noise(r, best)) >= _rate(best))


def _below(ok: list[dict[str, Any]], row: dict[str, Any]) -> int | None:
    smaller = [_b(r) for r in ok if _b(r) < _b(row)]
    return max(smaller) if smaller else None


def _refinement(
    ok: list[dict[str, Any]],
    knee: dict[str, Any],
    oom: dict[str, Any] | None,
    measured: set[int],
) -> int | None:
    """A batch that narrows the knee to a factor of two: between it and the batch below it
    (or, where the knee is the largest that ran, between it and the smallest out of memory);
    None where the gap is two-fold or less already."""
    low = _below(ok, knee)
    # the largest batch as the knee still rose beyond the noise: the knee's gap is above it
    pairs = [(low, _b(knee))] if low is not None and knee is not ok[-1] else []
    if oom is not None and knee is ok[-1]:
        pairs.append((_b(knee), _b(oom)))
    for lo, hi in pairs:
        if hi > 2 * lo:
            mid = _middle(lo, hi)
            if mid not in measured and lo < mid < hi:
                return mid
    return None


def _middle(lo: int, hi: int) -> int:
    """The power of two nearest the geometric middle of lo and hi (hi > 2 lo), inside them."""
    mid = 2 ** round((math.log2(lo) + math.log2(hi)) / 2)
    return min(max(mid, 2 * lo), hi // 2)


def _overshot(ok: list[dict[str, Any]]) -> bool:
    """Whether the last jump (over two-fold) followed a flat stretch and its step time grew
    more than as the square root of the batch: the knee lies inside the jump."""
    if len(ok) < 3:
        return False
    before, prev, top = ok[-3:]
    return (
        _b(top) > 2 * _b(prev)
        and _exponent(before, prev) < LAUNCH_EXPONENT
        and _exponent(prev, top) > 0.5
    )


def _exponent(a: dict[str, Any], b: dict[str, Any]) -> float:
    """e in step_time ~ batch**e between two rows (1: per-sample cost constant; 0: flat)."""
    sa, sb = _step(a), _step(b)
    if not sa or not sb or _b(a) == _b(b):
        return 1.0
    return math.log(sb / sa) / math.log(_b(b) / _b(a))


def predicted_s(ok: list[dict[str, Any]], batch: int) -> float:
    """The wall time a point at `batch` is predicted to take: the largest row's, scaled by the
    step time the line through the two largest rows predicts (never below the largest's), the
    line never flatter than _SLOPE_FLOOR of proportional growth."""
    top = ok[-1]
    s_top = _step(top)
    if not s_top:
        return seconds(top)
    slope = s_top / _b(top) * _SLOPE_FLOOR
    if len(ok) >= 2 and _step(ok[-2]):
        prev = ok[-2]
        slope = max(slope, (s_top - _step(prev)) / (_b(top) - _b(prev)))
    step = s_top + slope * max(batch - _b(top), 0)
    return seconds(top) * step / s_top


def _rising_words(ok: list[dict[str, Any]]) -> str:
    top = ok[-1]
    if len(ok) < 2:
        return f"B={_b(top)} is the only batch measured"
    prev = ok[-2]
    return (
        f"throughput still rising at B={_b(top)}: {wording.times(_rate(top) / _rate(prev))} "
        f"B={_b(prev)}'s "
        f"(noise {wording.percent(noise(prev, top))})"
    )


def _flattened_words(ok: list[dict[str, Any]], best: dict[str, Any]) -> str:
    top = ok[-1]
    if best is not top:
        return f"B={_b(best)} is the fastest; B={_b(top)} measured, no faster"
    prev = ok[-2]
    return (
        f"B={_b(top)} is within the noise of B={_b(prev)} "
        f"({wording.times(_rate(top) / _rate(prev))}, noise {wording.percent(noise(prev, top))})"
    )


def _b(row: dict[str, Any]) -> int:
    return int(row["batch_size"])


def _rate(row: dict[str, Any]) -> float:
    return float(row["samples_per_s"])


def _step(row: dict[str, Any]) -> float:
    return positive(row.get("step_time_s")) or 0.0


def _ci(row: dict[str, Any]) -> float:
    return figure(row.get("step_time_ci_rel")) or 0.0


def seconds(row: dict[str, Any]) -> float:
    """The point's wall time (`point_time_s`), else its steps' (measured, warm-up, one profiled)."""
    t = row.get("point_time_s")
    if t is not None and t == t:
        return float(t)
    steps = (row.get("steps_measured") or 0) + (row.get("warmup_steps") or 0) + 1
    return _step(row) * steps
