"""Sweeps split across machines: --shard i/n takes a deterministic share of the points, and
`merge` joins the shards' run folders into one, refusing a point measured twice."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpubench.cli.main import main
from gpubench.config.errors import ConfigError
from gpubench.config.keys import series_key
from gpubench.config.spec import Budget, Point
from gpubench.config.suite import SHIPPED, load_suite
from gpubench.run import shard
from gpubench.run.merge import merge
from gpubench.run.sweep import run_sweep
from gpubench.store.results import read_rows


@pytest.mark.parametrize("suite", ["quick", "scaling", "quick --steps"])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_shards_hold_every_point_once(suite: str, count: int) -> None:
    # the shipped suites' devices are auto: on the CPU, so the points are the same everywhere
    spec = dataclasses.replace(load_suite(SHIPPED / f"{suite.split()[0]}.toml"), devices=("cpu",))
    if suite.endswith("--steps"):  # a fixed step count: no time limit to weigh points by
        spec = dataclasses.replace(spec, budget=Budget.fixed(3))
    points = spec.points()
    shares = [shard.select(points, i, count, spec) for i in range(1, count + 1)]
    assert sorted(p.key() for s in shares for p in s) == sorted(p.key() for p in points)
    assert shares == [shard.select(points, i, count, spec) for i in range(1, count + 1)]
    costs = [sum(shard.expected_cost(p, spec) for p in s) for s in shares]
    # largest first to the least loaded: no two shards differ by more than one series
    # (a series: the points that share one baseline, weak and strong at every nproc, issue 23)
    series_cost: dict[tuple[object, ...], float] = {}
    for p in points:
        key = p.baseline().key()
        series_cost[key] = series_cost.get(key, 0.0) + shard.expected_cost(p, spec)
    series = max(series_cost.values())
    assert max(costs) - min(costs) <= series * (1 + 1e-9)
    for s in shares:  # a parallel point's nproc = 1 baseline is in its shard
        keys = {p.key() for p in s}
        for p in s:
            if p.parallel != "none":
                assert p.baseline().key() in keys


@pytest.mark.parametrize("suite", ["quick", "scaling", "quick --steps"])
def test_a_launch_deals_whole_series_balanced(suite: str) -> None:
    """A launch's shards (whole_series, issue 53): every batch-size series (config.keys'
    series_key of its baseline: every batch size and nproc) whole in one shard, every point
    once, and the shards' expected costs within the costliest series' of each other."""
    spec = dataclasses.replace(load_suite(SHIPPED / f"{suite.split()[0]}.toml"), devices=("cpu",))
    if suite.endswith("--steps"):
        spec = dataclasses.replace(spec, budget=Budget.fixed(3))
    points = spec.points()
    series_cost: dict[tuple[object, ...], float] = {}
    for p in points:
        key = series_key(vars(p.baseline()))
        series_cost[key] = series_cost.get(key, 0.0) + shard.expected_cost(p, spec)
    assert len({p.batch_size for p in points}) > 1  # there are batch sizes to keep together
    assert shard.series_count(points, whole_series=True) == len(series_cost) > 1
    for count in range(1, len(series_cost) + 1):
        shares = [shard.select(points, i, count, spec, True) for i in range(1, count + 1)]
        assert sorted(p.key() for s in shares for p in s) == sorted(p.key() for p in points)
        where = {}
        for i, s in enumerate(shares):
            assert s, f"shard {i + 1}/{count} holds nothing"
            for p in s:
                assert where.setdefault(series_key(vars(p.baseline())), i) == i, p.label()
        costs = [sum(shard.expected_cost(p, spec) for p in s) for s in shares]
        assert max(costs) - min(costs) <= max(series_cost.values()) * (1 + 1e-9)
    # one more shard than series is refused, naming the count and what is allowed
    n = len(series_cost)
    with pytest.raises(ConfigError, match=rf"series' batch sizes .* allowed: i/n .* <= {n}$"):
        shard.select(points, 1, n + 1, spec, True)


def test_a_users_shard_still_splits_a_series_but_a_launchs_does_not(tmp_path: Path) -> None:
    """--shard I/N deals point by point (docs/scale.md: a series' batch sizes count apart, so
    one series can be split across machines); a launch's whole series cannot be; the folder
    records the dealing, its resume keeps it, and a folder of the other dealing is refused."""
    spec = dataclasses.replace(
        load_suite(SHIPPED / "quick.toml"),
        models=("mlp",),
        devices=("cpu",),
        batch_sizes=(2, 4, 8),
        precisions=("fp32",),
        optimizers=("sgd",),
    )
    points = spec.points()
    assert [len(shard.select(points, i, 3, spec)) for i in (1, 2, 3)] == [1, 1, 1]
    assert shard.select(points, 1, 1, spec, True) == points
    with pytest.raises(ConfigError, match=r"invalid shard 1/2: .* has 1 point series"):
        shard.select(points, 1, 2, spec, True)
    # shard.json: a folder from before `whole_series` reads as dealt point by point
    (tmp_path / "shard.json").write_text(json.dumps({"index": 1, "count": 2}))
    was = shard.saved(tmp_path, None, whole_series=True)
    assert was is not None and (was.index, was.count, was.whole_series) == (1, 2, False)
    with pytest.raises(ConfigError, match=r"dealt point by point, not by whole batch-size"):
        shard.saved(tmp_path, (1, 2), whole_series=True)
    launched = tmp_path / "launched"
    launched.mkdir()
    shard.saved(launched, (2, 3), whole_series=True)
    assert json.loads((launched / "shard.json").read_text())["whole_series"] is True
    again = shard.saved(launched, None)
    assert again is not None and again.whole_series


def test_a_bad_shard_is_refused() -> None:
    for text in ("0/2", "3/2", "1", "a/b"):
        with pytest.raises(ConfigError, match="allowed: i/n"):
            shard.parse_shard(text)


def _keys(run: Path) -> list[tuple[object, ...]]:
    fields = Point.__dataclass_fields__
    return sorted(Point(**{k: r[k] for k in fields}).key() for r in read_rows(run))


def test_two_shards_merge_into_the_whole_sweep(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    spec = dataclasses.replace(
        load_suite(SHIPPED / "quick.toml"),
        models=("mlp",),
        size="tiny",
        devices=("cpu",),
        batch_sizes=(2, 4, 8),
        precisions=("fp32",),
        optimizers=("sgd",),
        budget=Budget.fixed(2, warmup_steps=1),
    )
    a, b, whole = tmp_path / "a", tmp_path / "b", tmp_path / "merged"
    rows_a = run_sweep(spec, a, shard=(1, 2))
    rows_b = run_sweep(spec, b, shard=(2, 2))
    assert len(rows_a) and len(rows_b)
    assert main(["merge", str(a), str(b), "--out", str(whole)]) == 0
    assert sorted(r["batch_size"] for r in read_rows(whole)) == [2, 4, 8]
    assert _keys(whole) == sorted(_keys(a) + _keys(b))
    env = json.loads((whole / "env.json").read_text())
    assert [m["run"] for m in env["machines"]] == [str(a), str(b)]
    assert (whole / "report.html").is_file() and (whole / "suite.json").is_file()
    assert "merged 2 run folders: 3 rows" in capsys.readouterr().out
    # a shard resumed without --shard stays its shard; another shard is refused
    assert len(run_sweep(spec, a, resume=True)) == len(rows_a)
    with pytest.raises(ConfigError, match=r"holds shard 1/2, not 2/2"):
        run_sweep(spec, a, resume=True, shard=(2, 2))

    # the same point twice is refused, naming both runs and their machines
    with pytest.raises(ConfigError, match=r"is in .*/a \(host .*\) and in .*/a"):
        merge([a, whole], tmp_path / "twice")
    kept = merge([a, whole], tmp_path / "twice", allow_duplicates=True)
    assert kept.rows == 3 and kept.dropped == len(rows_a)
