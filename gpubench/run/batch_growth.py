"""Batch sizes that keep doubling on a device until the series answers: a suite's CPU-sized batches
leave every series on an 80 GB GPU still speeding up at its largest. With
`grow_batch_sizes = ["cuda"]`, a series (points differing only in batch size) on that device
type measures twice its largest while that one ran `ok` and is the series' fastest, up to
MAX_DOUBLINGS doublings past the largest listed. A failed batch (an `oom` row) ends it too.
Speed sweeps of single-process points with listed batch sizes only, and not under --shard (a
shard holds only part of a series).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from gpubench.config.spec import AUTO, Point, SweepSpec

# 64 grows to 65,536 at the most, where max-batch's search stops too (run.maxbatch.CEILING)
MAX_DOUBLINGS = 10


def series_key(point: Point) -> tuple[Any, ...]:
    """The series `point` belongs to: every identity field but the batch size."""
    return dataclasses.replace(point, batch_size=0).key()


def grows(spec: SweepSpec, point: Point, sharded: bool) -> bool:
    """Whether `point`'s series may grow past its listed batch sizes in `spec`'s sweep."""
    return (
        spec.mode == "speed"
        and spec.batch_sizes != AUTO
        and not sharded
        and point.parallel == "none"
        and point.device.split(":")[0] in spec.grow_batch_sizes
    )


def next_batch(rows: Sequence[dict[str, Any]], listed_largest: int) -> int | None:
    """The batch a series (`rows`, any order) measures next: twice its largest where that ran
    `ok`, faster than every smaller batch, within MAX_DOUBLINGS of `listed_largest`; else None."""
    if not rows:
        return None
    largest = max(rows, key=lambda r: int(r["batch_size"]))
    batch = int(largest["batch_size"])
    if largest.get("status") != "ok" or batch >= listed_largest * 2**MAX_DOUBLINGS:
        return None
    rate = float(largest["samples_per_s"])
    smaller = [
        float(r["samples_per_s"])
        for r in rows
        if int(r["batch_size"]) < batch and r.get("status") == "ok"
    ]
    if any(other >= rate for other in smaller):
        return None
    return 2 * batch
