"""A deterministic share of a sweep's points (`--shard i/n`) for n machines or a Slurm array job;
`gpubench merge` joins their folders. Series are dealt out by expected cost (what the budget allows
a point, times its processes), largest first, each to the shard with the least so far (ties to
the lowest), so every machine computes the same split. A parallel point's series (every nproc)
stays together, so each shard has its nproc = 1 baseline.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import AUTO, Point, SweepSpec
from gpubench.store import shard_record
from gpubench.store.shard_record import ShardRecord

_SHARD = re.compile(r"^(\d+)/(\d+)$")


def parse_shard(text: str) -> tuple[int, int]:
    """ "i/n" (1 <= i <= n) as (i, n)."""
    m = _SHARD.match(text.strip())
    if m is None or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ConfigError(f"invalid shard {text!r}; allowed: i/n with 1 <= i <= n, e.g. 1/2")
    return int(m.group(1)), int(m.group(2))


def expected_cost(point: Point, spec: SweepSpec) -> float:
    """What `spec`'s budget allows `point` (seconds, or steps under --steps), times its
    processes: a bound, not a prediction."""
    b = spec.budget
    if spec.mode == "convergence" and spec.convergence.time_limit_s() is not None:
        per_point = float(spec.convergence.time_limit_s() or 0.0)
    elif math.isfinite(b.max_time_s):
        per_point = b.warmup_min_s + b.max_time_s
    else:
        per_point = float(b.warmup_steps + b.max_steps)
    return per_point * point.nproc


def check_count(shard: tuple[int, int], points: list[Point], spec: SweepSpec) -> None:
    """Refuse a shard count above the number of series in `points`: such shards would hold
    nothing, and the count is a typo."""
    series = len({p.baseline().key() for p in points})  # weak and strong: one series (#23)
    if shard[1] > series:
        raise ConfigError(
            f"invalid shard {shard[0]}/{shard[1]}: suite {spec.name!r} has {series} point "
            f"series to share (a parallel point's nproc values count once); allowed: i/n with "
            f"1 <= i <= n <= {series}"
        )


def check_before_writing(shard: tuple[int, int] | None, spec: SweepSpec) -> None:
    """check_count before the sweep writes anything, where the points are known already
    (not for batch_sizes = "auto": `select` checks after the search)."""
    if shard is not None and spec.batch_sizes != AUTO:
        check_count(shard, list(dict.fromkeys(spec.points())), spec)


def select(points: list[Point], index: int, count: int, spec: SweepSpec) -> list[Point]:
    """Shard `index` of `count` (1-based) of `points`, in their order; the shards are disjoint
    and hold every point once."""
    check_count((index, count), points, spec)
    costs: dict[tuple[Any, ...], float] = {}
    for p in points:  # a series: a point and its baseline's other process counts
        costs[p.baseline().key()] = costs.get(p.baseline().key(), 0.0) + expected_cost(p, spec)
    load = [0.0] * count
    chosen: set[tuple[Any, ...]] = set()
    for key in sorted(costs, key=lambda k: -costs[k]):  # stable: ties keep the points' order
        shard = min(range(count), key=lambda s: (load[s], s))
        load[shard] += costs[key]
        if shard == index - 1:
            chosen.add(key)
    return [p for p in points if p.baseline().key() in chosen]


def saved(run_dir: Path, shard: tuple[int, int] | None) -> tuple[int, int] | None:
    """The run folder's shard: `shard`, recorded in its shard.json, or where None the one
    recorded (a resume stays that shard); a folder of another shard is a ConfigError."""
    was = shard_record.read(run_dir)
    if was is not None:
        if shard is None:
            return was.index, was.count
        if (was.index, was.count) != shard:
            raise ConfigError(
                f"run folder {str(run_dir)!r} holds shard {was.index}/{was.count}, not "
                f"{shard[0]}/{shard[1]}; resume it with --shard {was.index}/{was.count}"
            )
    if shard is not None:
        ShardRecord(*shard).write(run_dir)
    return shard
