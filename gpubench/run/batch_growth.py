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
from collections.abc import Sequence
from typing import Any

from gpubench.config.spec import AUTO, Point, SweepSpec
from gpubench.science import growth
from gpubench.science.growth import AUTO_BUDGET_S, SERIES_BUDGET_S, Growth

AUTO_START = 1
GROWTH_FILE = "growth.json"  # each grown series' last decision, by its label


def series_key(point: Point) -> tuple[Any, ...]:
    """The series `point` belongs to: every identity field but the batch size."""
    return dataclasses.replace(point, batch_size=0).key()


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


def record(decisions: dict[str, Growth], unreached: Sequence[Point] = ()) -> dict[str, Any]:
    """growth.json's content: `series`, per series label, where and why it stopped (or the
    batch it measures next); `not_reached`, the labels of the points planned and not measured
    where the sweep was stopped before its end (a grown series' next batch among them)."""
    return {
        "series": {
            name: {"reason": g.reason, "detail": g.detail, "next_batch": g.batch}
            for name, g in decisions.items()
        },
        "not_reached": [p.label() for p in unreached],
    }
