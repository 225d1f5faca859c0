"""Scaling efficiency of parallel points: a point's throughput over what its baseline, the same
point in one process on one node, would give if every rank added as much as that one did.

Efficiency = X_n / ((W_n / W_1) * X_1), with X the global samples/s and W the world size (ranks
in all, nproc times the nodes; W_1 = 1). Under weak scaling each rank keeps its batch, so perfect
scaling multiplies throughput by the ranks; under strong scaling the global batch is split, and
perfect scaling divides the step time by them: the same formula in both.

One process is the same workload under weak and strong scaling, so it is one point (scaling
None) and the one baseline of both (issue 23). A baseline is on the point's own machine (`host`)
unless asked otherwise; an efficiency from a noisy row or a noisy baseline says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpubench.config.spec import Point
from gpubench.science.partition import norm
from gpubench.science.standing import ran
from gpubench.store.wording import cell

# An identity field a row written before it existed lacks (or holds as null): its value then.
DEFAULTS = {"nodes": 1}


def baseline_key(row: dict[str, Any], across_machines: bool = False) -> tuple[Any, ...]:
    """The identity of `row`'s baseline (Point.baseline: the same point in one process on one
    node), on the same machine (`host`; a row without one, written before rows named their
    machine, is on an unknown one, matched only by other such rows) unless `across_machines`."""
    key = Point.of(row).baseline().key()
    return key if across_machines else (*key, _value(row, "host"))


def _value(row: dict[str, Any], column: str) -> Any:
    value = norm(row.get(column))
    return DEFAULTS.get(column) if value is None else value


def world_size(row: dict[str, Any]) -> int:
    """The ranks of `row`'s point: its measured `world_size`, else nproc * nodes."""
    measured = norm(row.get("world_size"))
    if measured is not None:
        return int(measured)
    return int(_value(row, "nproc") or 1) * int(_value(row, "nodes"))


def is_baseline(row: dict[str, Any]) -> bool:
    """Whether `row` is a parallel point that ran in one process on one node (a row written
    before issue 23 holds a scaling of its own there: it is a baseline all the same)."""
    parallel = norm(row.get("parallel"))
    return parallel not in (None, "none") and world_size(row) == 1


def efficiency(row: dict[str, Any], baseline: dict[str, Any]) -> float | None:
    """`row`'s scaling efficiency against `baseline` (both rows that ran), or None."""
    if not (ran(row) and ran(baseline)):
        return None
    ratio = world_size(row) / world_size(baseline)
    return float(row["samples_per_s"]) / (ratio * float(baseline["samples_per_s"]))


def fill_efficiency(
    rows: Iterable[dict[str, Any]],
    known: Iterable[dict[str, Any]] = (),
    across_machines: bool = False,
) -> None:
    """Set `scaling_efficiency`, `scaling_baseline_samples_per_s` and
    `scaling_efficiency_noisy` (the row or its baseline is noisy) on each parallel row of
    `rows` that has no efficiency yet and whose baseline ran, among `known` and `rows`, on the
    same machine unless `across_machines`. Where two rows could be the baseline (a folder
    written before issue 23 measured one process once per scaling), the first is, so that every
    efficiency of an identity is against one baseline."""
    rows = list(rows)
    baselines: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in (*known, *rows):
        if is_baseline(r) and ran(r):
            baselines.setdefault(baseline_key(r, across_machines), r)
    for row in rows:
        if (
            norm(row.get("parallel")) in (None, "none")
            or norm(row.get("scaling_efficiency")) is not None
        ):
            continue
        base = baselines.get(baseline_key(row, across_machines))
        if base is None:
            continue
        value = efficiency(row, base)
        if value is not None:
            row["scaling_efficiency"] = value
            row["scaling_baseline_samples_per_s"] = base["samples_per_s"]
            # noisy: True as written, 1.0 as a frame of numbers reads it
            row["scaling_efficiency_noisy"] = any(norm(r.get("noisy")) == 1 for r in (row, base))


def efficiency_words(row: dict[str, Any]) -> str:
    """A parallel point's scaling efficiency in percent, as the terminal and the report both
    say it: '75%', '75% (noisy)' where its point or its baseline is noisy; '' without one."""
    value = cell(row.get("scaling_efficiency"), ".0f", 100)
    noisy = row.get("scaling_efficiency_noisy")
    return f"{value}%" + (" (noisy)" if noisy is not None and noisy == 1 else "") if value else ""
