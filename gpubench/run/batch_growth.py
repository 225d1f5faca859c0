"""Batch sizes that keep doubling on a device until the series answers (issue 28, item 7).

A suite's batch sizes are chosen for the CPU: on an 80 GB GPU, batches of 4 to 64 leave every
series still speeding up at its largest, and the verdict can only say "measure larger batches".
With `grow_batch_sizes = ["cuda"]` (the default suite's), each series of points that differ
only in batch size keeps going on that device type after its largest listed batch: twice the
largest measured, for as long as that one ran and is the series' fastest. It stops where

- a batch is no faster than a smaller one of the series (throughput has flattened: the
  fastest is bracketed by a larger batch measured no faster),
- a batch did not run (out of memory: memory ends there, and the `oom` row says so; an error
  or a timeout), or
- MAX_DOUBLINGS doublings past the largest listed batch were made (the bound on its time).

Each grown point costs what the suite's budget allows one point. Growth applies to speed
sweeps of single-process points with listed batch sizes (`"auto"` measures up to the memory
limit already), and not under --shard (a shard holds only part of a series).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from gpubench.config.spec import AUTO, Point, SweepSpec

# Doublings past the largest listed batch, at the most: 64 grows to 65,536 at the most, where
# max-batch's search stops too (run.maxbatch.CEILING).
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
    """The batch size a series measures next, from its rows so far (`rows`: every row of one
    series, in any order) and the largest batch size its suite lists: twice the largest
    measured where that one ended `ok` with more samples/s than every smaller batch of the
    series and fewer than MAX_DOUBLINGS doublings past `listed_largest` were made; None where
    the series has answered (see the module docstring)."""
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
