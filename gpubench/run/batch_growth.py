"""Which batch-size series grow in a sweep, the time each may take, and the record of why each
stopped. The rule that decides the next batch is science.growth.decide (one rule for the default
sweep, `--batch-sizes auto` and the verdict's wording); this module applies it to the sweep's
series: with `grow_batch_sizes = ["cpu", "cuda"]` a series (points differing only in batch
size) on those device types goes on past its largest listed batch; with batch_sizes = "auto" it
starts at AUTO_START and grows from there. Speed sweeps of single-process points only, and not
under --shard (a shard holds only part of a series).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpubench.config.keys import SERIES
from gpubench.config.spec import AUTO, Point, SweepSpec
from gpubench.science import growth, leaders
from gpubench.science.growth import AUTO_BUDGET_S, SERIES_BUDGET_S, Growth
from gpubench.store.growth_record import GrowthRecord, Stop, Unmeasured
from gpubench.store.wording import seconds

AUTO_START = 1


def grows(spec: SweepSpec, point: Point, sharded: bool) -> bool:
    """Whether `point`'s series may grow past its planned batch sizes in `spec`'s sweep."""
    return (
        spec.mode == "speed"
        and not sharded
        and point.parallel == "none"
        and (spec.batch_sizes == AUTO or point.device.split(":")[0] in spec.grow_batch_sizes)
    )


def budget_s(spec: SweepSpec, point: Point) -> float:
    """The seconds `point`'s series may take (SERIES_BUDGET_S, AUTO_BUDGET_S for "auto")."""
    table = AUTO_BUDGET_S if spec.batch_sizes == AUTO else SERIES_BUDGET_S
    return table.get(point.device.split(":")[0], table["cpu"])


def next_batch(spec: SweepSpec, point: Point, rows: Sequence[dict[str, Any]]) -> Growth:
    """The rule's decision for `point`'s series from its rows so far (science.growth), its
    batch a multiple of the point's micro-batches (a batch that does not split is no point)."""
    decided = growth.decide(rows, budget_s(spec, point))
    k = point.accumulate
    if decided.batch is None or decided.batch % k == 0:
        return decided
    batch = max(k, round(decided.batch / k) * k)
    if batch in {int(r["batch_size"]) for r in rows}:
        return Growth(None, "flattened", decided.detail)
    return dataclasses.replace(decided, batch=batch)


def stop(point: Point, decided: Growth) -> Stop:
    """growth.json's entry for `point`'s series (store.growth_record): where and why it stopped
    (or the batch it measures next), the series named by its settings but the batch size."""
    series = {k: v for k, v in point.to_dict().items() if k not in SERIES}
    return Stop(decided.reason, decided.detail, decided.batch, series)


def record(
    stops: Iterable[Stop],
    unmeasured: Sequence[Unmeasured] = (),
    labelled: Mapping[str, Stop] | None = None,
) -> GrowthRecord:
    """growth.json's content (store.growth_record): each grown series' `stops` (one per
    series), the points planned and not measured, and an old growth.json's stops by label
    (`labelled`, kept on a resume)."""
    return GrowthRecord(tuple(stops), tuple(unmeasured), dict(labelled or {}))


def over_budget(spec: SweepSpec, point: Point, rows: Sequence[dict[str, Any]]) -> str | None:
    """Why a listed `point` of a growing series is not started (None: it is): the rows of its
    series so far have spent its time budget, or its predicted time (science.growth's, from the
    two largest batches measured) is more than the budget has left. The first batch of a
    series always runs."""
    ok = sorted((r for r in rows if growth.ran(r)), key=lambda r: int(r["batch_size"]))
    if not ok:
        return None
    budget = budget_s(spec, point)
    spent = sum(growth.seconds(r) for r in rows)
    cost = growth.predicted_s(ok, point.batch_size)
    if spent + cost <= budget:
        return None
    return (
        f"B={point.batch_size} would take about {seconds(cost)}, "
        f"{seconds(max(budget - spent, 0.0))} of its series' {seconds(budget)} left"
    )


def overturned(
    spec: SweepSpec, rows: Sequence[dict[str, Any]], partitions: list[dict[str, Any]]
) -> list[Point]:
    """The next batch of each grown series that the confirmation (confirm.json's `partitions`)
    left unbracketed: its rows read its largest batch no faster than a smaller one, so the
    series stopped as flattened, and the interleaved rounds found that largest batch ahead of
    the rows' fastest by more than the margin. Twice it, so that the answer is bracketed by a
    measured larger batch, never left at "larger batches not measured"; none past the ceiling,
    where a larger batch was measured or failed, or where the series does not grow."""
    out = []
    for part in partitions:
        if not part.get("decision"):
            continue
        decision = leaders.Decision.from_dict(part["decision"])
        candidates = [Point.of(c) for c in part["candidates"]]
        leader = candidates[decision.leader]
        series = [r for r in rows if Point.of(r).key(drop=SERIES) == leader.key(drop=SERIES)]
        ok = [r for r in series if growth.ran(r)]
        if (
            not ok
            or not grows(spec, leader, sharded=False)
            or any(int(r["batch_size"]) > leader.batch_size for r in series)
            or leader.batch_size * 2 > growth.CEILING
        ):
            continue
        by_rows = Point.of(max(ok, key=lambda r: float(r["samples_per_s"]))).key()
        rounds = [c for c in decision.comparisons if candidates[c.candidate].key() == by_rows]
        if rounds and growth.overturned(ok, rounds[0], decision.margin):
            out.append(dataclasses.replace(leader, batch_size=leader.batch_size * 2))
    return out
