"""A deterministic share of a sweep's points (`--shard i/n`), so that n machines, or a Slurm
array job, run one sweep between them; `gpubench merge` joins their run folders.

Points are dealt out by their expected cost, not their count: each point's cost is the time its
budget allows it (warm-up minimum plus the measuring limit; a convergence point's training
limit; with a fixed step count, its steps), counted once per process for a parallel point,
which occupies that many. The largest go
first, each to the shard with the least so far (ties to the lowest shard), so every machine
computes the same split from the same suite. The points of a parallel point's scaling series
(the same point at every nproc) stay together, so each shard has its nproc = 1 baseline.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import AUTO, Point, SweepSpec
from gpubench.store.results import ResultStore

_SHARD = re.compile(r"^(\d+)/(\d+)$")


def parse_shard(text: str) -> tuple[int, int]:
    """ "i/n" (1 <= i <= n) as (i, n)."""
    m = _SHARD.match(text.strip())
    if m is None or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ConfigError(f"invalid shard {text!r}; allowed: i/n with 1 <= i <= n, e.g. 1/2")
    return int(m.group(1)), int(m.group(2))


def expected_cost(point: Point, spec: SweepSpec) -> float:
    """What `spec`'s budget allows `point` (a bound, not a prediction), times its processes:
    seconds where the budget has a time limit; otherwise (--steps N) its steps, the same for
    every point of the sweep, so that only the processes weigh."""
    b = spec.budget
    if spec.mode == "convergence" and spec.convergence.time_limit_s() is not None:
        per_point = float(spec.convergence.time_limit_s() or 0.0)
    elif math.isfinite(b.max_time_s):
        per_point = b.warmup_min_s + b.max_time_s
    else:
        per_point = float(b.warmup_steps + b.max_steps)
    return per_point * point.nproc


def _series(point: Point) -> tuple[Any, ...]:
    return point.baseline().key()  # issue 23: weak and strong share one baseline


def check_count(shard: tuple[int, int], points: list[Point], spec: SweepSpec) -> None:
    """Refuse a shard count above the number of series in `points` (a parallel point's nproc
    values are one series): shards beyond it would hold no point, and a count that large is a
    typo, not a plan (1/99999999999999999999 once failed deep inside the sweep)."""
    series = len({_series(p) for p in points})
    if shard[1] > series:
        raise ConfigError(
            f"invalid shard {shard[0]}/{shard[1]}: suite {spec.name!r} has {series} point "
            f"series to share (a parallel point's nproc values count once); allowed: i/n with "
            f"1 <= i <= n <= {series}"
        )


def check_before_writing(shard: tuple[int, int] | None, spec: SweepSpec) -> None:
    """check_count on the suite's points where they are known before the sweep writes anything
    (batch_sizes = "auto" is planned by a search, and checked by `select` after it)."""
    if shard is not None and spec.batch_sizes != AUTO:
        check_count(shard, list(dict.fromkeys(spec.points())), spec)


def select(points: list[Point], index: int, count: int, spec: SweepSpec) -> list[Point]:
    """Shard `index` of `count` (1-based) of `points`, in their order. The shards of one list
    are disjoint and together hold every point once; a count above the number of series is a
    ConfigError (check_count)."""
    check_count((index, count), points, spec)
    groups: dict[tuple[Any, ...], list[Point]] = {}
    for p in points:
        groups.setdefault(_series(p), []).append(p)
    costs = {key: sum(expected_cost(p, spec) for p in ps) for key, ps in groups.items()}
    order = sorted(range(len(groups)), key=lambda i: -costs[list(groups)[i]])
    load = [0.0] * count
    chosen: set[tuple[Any, ...]] = set()
    keys = list(groups)
    for i in order:
        shard = min(range(count), key=lambda s: (load[s], s))
        load[shard] += costs[keys[i]]
        if shard == index - 1:
            chosen.add(keys[i])
    return [p for p in points if _series(p) in chosen]


def saved(store: ResultStore, shard: tuple[int, int] | None) -> tuple[int, int] | None:
    """The run folder's shard: `shard`, recorded in its shard.json, or, when None, the one
    recorded there (a resumed shard stays that shard). A folder started as another shard is a
    ConfigError (its rows would mix two shares)."""
    path = store.dir / "shard.json"
    if path.is_file():
        was = json.loads(path.read_text(encoding="utf-8"))
        if shard is None:
            return int(was["index"]), int(was["count"])
        if (was.get("index"), was.get("count")) != shard:
            raise ConfigError(
                f"run folder {str(store.dir)!r} holds shard {was.get('index')}/{was.get('count')}"
                f", not {shard[0]}/{shard[1]}; resume it with --shard "
                f"{was.get('index')}/{was.get('count')}"
            )
    if shard is not None:
        store.write_json("shard.json", {"index": shard[0], "count": shard[1]})
    return shard
