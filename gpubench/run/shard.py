"""A deterministic share of a sweep's points (`--shard i/n`) for n machines or a Slurm array job;
`gpubench merge` joins their folders. Units are dealt out by expected cost (what the budget allows
a point, times its processes), largest first, each to the shard with the least so far (ties to
the lowest), so every machine computes the same split.

Two units (`whole_series`): `--shard I/N` typed by a user deals each point with its parallel
series (the same point at every nproc, so each shard has its nproc = 1 baseline), so one series
of batch sizes can be split across machines; a launch (run.launcher, issue 53) deals whole
batch-size series (config.keys.series_key of the baseline: every batch size and nproc of one
model, size, precision, optimizer, ... together), so a series is measured in one job, on one
machine, and the verdict's batch comparison compares like with like. A shard's folder records
which (shard.json's `whole_series`), so its resume and explain plan the same points.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from gpubench.config.errors import ConfigError
from gpubench.config.keys import Key, series_key
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


def unit(point: Point, whole_series: bool = False) -> Key:
    """What `point` is dealt with: its baseline's identity (its parallel series: every nproc,
    weak and strong), or with `whole_series` its baseline's batch-size series (every batch
    size too: config.keys.series_key)."""
    base = point.baseline()
    return series_key(vars(base)) if whole_series else base.key()


def series_count(points: list[Point], whole_series: bool = False) -> int:
    """The units (see `unit`) `points` has to share among shards."""
    return len({unit(p, whole_series) for p in points})


def check_count(
    shard: tuple[int, int], points: list[Point], spec: SweepSpec, whole_series: bool = False
) -> None:
    """Refuse a shard count above the number of units (see `unit`) in `points`: such shards
    would hold nothing, and the count is a typo."""
    series = series_count(points, whole_series)  # weak and strong: one series (#23)
    counted = "a series' batch sizes and " if whole_series else "a "
    if shard[1] > series:
        raise ConfigError(
            f"invalid shard {shard[0]}/{shard[1]}: suite {spec.name!r} has {series} point "
            f"series to share ({counted}parallel point's nproc values count once); allowed: "
            f"i/n with 1 <= i <= n <= {series}"
        )


def check_before_writing(
    shard: tuple[int, int] | None, spec: SweepSpec, whole_series: bool = False
) -> None:
    """check_count before the sweep writes anything, where the points are known already
    (not for batch_sizes = "auto": `select` checks after the search)."""
    if shard is not None and spec.batch_sizes != AUTO:
        check_count(shard, list(dict.fromkeys(spec.points())), spec, whole_series)


def select(
    points: list[Point], index: int, count: int, spec: SweepSpec, whole_series: bool = False
) -> list[Point]:
    """Shard `index` of `count` (1-based) of `points`, in their order; the shards are disjoint
    and hold every point once, each unit (see `unit`) whole in one shard. Their expected costs
    differ by at most the costliest unit's (each unit goes to the least loaded shard)."""
    check_count((index, count), points, spec, whole_series)
    costs: dict[Key, float] = {}
    for p in points:
        key = unit(p, whole_series)
        costs[key] = costs.get(key, 0.0) + expected_cost(p, spec)
    load = [0.0] * count
    chosen: set[Key] = set()
    for key in sorted(costs, key=lambda k: -costs[k]):  # stable: ties keep the points' order
        shard = min(range(count), key=lambda s: (load[s], s))
        load[shard] += costs[key]
        if shard == index - 1:
            chosen.add(key)
    return [p for p in points if unit(p, whole_series) in chosen]


def saved(
    run_dir: Path, shard: tuple[int, int] | None, whole_series: bool = False
) -> ShardRecord | None:
    """The run folder's shard: `shard` (dealt by `whole_series`), recorded in its shard.json,
    or where None the one recorded (a resume stays that shard, dealt as it was); a folder of
    another shard, or of the same one dealt the other way, is a ConfigError."""
    was = shard_record.read(run_dir)
    if was is not None:
        if shard is None:
            return was
        if (was.index, was.count) != shard:
            raise ConfigError(
                f"run folder {str(run_dir)!r} holds shard {was.index}/{was.count}, not "
                f"{shard[0]}/{shard[1]}; resume it with --shard {was.index}/{was.count}"
            )
        if was.whole_series != whole_series:
            raise ConfigError(
                f"run folder {str(run_dir)!r} holds shard {was.index}/{was.count} dealt "
                f"{_dealt(was.whole_series)}, not {_dealt(whole_series)}; allowed: its resume "
                f"by the gpubench that dealt it"
            )
    if shard is None:
        return None
    record = ShardRecord(shard[0], shard[1], whole_series)
    record.write(run_dir)
    return record


def _dealt(whole_series: bool) -> str:
    return "by whole batch-size series (a launch's)" if whole_series else "point by point"
