"""What a sweep records without measuring, the same in one worker (run.sweep) and in a device
pool (run.pool): a batch skipped as `oom` where a smaller batch of its memory group ran out of
memory, and a point left out for a precision its device only emulates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpubench.config import precision
from gpubench.config.spec import Point, SweepSpec
from gpubench.store.row import make_row

# What a memory group's points differ in: a larger batch of the group needs more memory.
MEMORY_GROUP = ("batch_size", "seed")


def emulated(spec: SweepSpec, points: Sequence[Point]) -> dict[Point, str]:
    """The points of `points` left out for a precision their device only emulates (where
    `spec.skip_emulated`: the default sweep), each with why and the flag that measures it."""
    if not spec.skip_emulated:
        return {}
    out = {}
    for p in points:
        why = precision.emulated_reason(p.precision, p.device.split(":")[0])
        if why is not None:
            out[p] = f"{why}; --precisions {','.join(spec.precisions)} measures it"
    return out


def ran_out(rows: Sequence[dict[str, Any]]) -> dict[tuple[Any, ...], int]:
    """Each memory group's smallest batch that ran out of memory in `rows` (a point skipped
    for a smaller batch's is not one)."""
    oom_at: dict[tuple[Any, ...], int] = {}
    for r in rows:
        if r.get("status") == "oom" and not str(r.get("error") or "").startswith("skipped:"):
            note_oom(oom_at, Point.of(r))
    return oom_at


def note_oom(oom_at: dict[tuple[Any, ...], int], point: Point) -> None:
    """`point` ran out of memory: its memory group's smallest such batch in `oom_at`."""
    group = point.key(drop=MEMORY_GROUP)
    oom_at[group] = min(oom_at.get(group, point.batch_size), point.batch_size)


def skipped_oom(oom_at: dict[tuple[Any, ...], int], point: Point) -> dict[str, Any] | None:
    """`point`'s `oom` row, unmeasured, where a smaller batch of its memory group ran out of
    memory (`oom_at`); None where none did."""
    smallest = oom_at.get(point.key(drop=MEMORY_GROUP))
    if smallest is None or point.batch_size <= smallest:
        return None
    return make_row(point, "oom", error=f"skipped: B={smallest} ran out of memory")
