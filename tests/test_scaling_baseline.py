"""Issue 23: one baseline per identity. One process is the same workload under weak and strong
scaling, so it is measured once and every efficiency of the identity is against it; the world
size (nproc * nodes) is in the identity; a baseline is on the point's own machine; an
efficiency from a noisy row says so."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.config.suite import load_suite
from gpubench.harness.parallel import per_process_batch, unsupported_reason
from gpubench.run.sweep import run_sweep
from gpubench.science import scaling
from gpubench.store.row import make_row

SUITES = Path(__file__).resolve().parent.parent / "gpubench" / "suites"


def _row(nproc: int, scaling_: str | None, rate: float, **values: Any) -> dict[str, Any]:
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", 8, parallel="ddp", nproc=nproc)
    fields = values.pop("point", {})
    point = dataclasses.replace(point, scaling=scaling_, **fields)
    values.setdefault("world_size", nproc * fields.get("nodes", 1))
    return make_row(point, "ok", samples_per_s=rate, noisy=values.pop("noisy", False), **values)


def test_one_process_is_one_point_shared_by_weak_and_strong() -> None:
    spec = SweepSpec("s", models=("mlp",), devices=("cpu",), batch_sizes=(8,), parallel=("ddp",))
    spec = dataclasses.replace(spec, nproc=(1, 2), scaling=("weak", "strong"))
    layouts = [(p.nproc, p.scaling) for p in spec.points()]
    assert layouts == [(1, None), (2, "weak"), (2, "strong")]


def test_the_shipped_scaling_suite_sets_every_efficiency_against_one_baseline(
    tmp_path: Path,
) -> None:
    """The shipped suite's axes, shrunk to one model, batch and layout (its parallel, nproc and
    scaling axes as shipped) and a short budget."""
    shipped = load_suite(SUITES / "scaling.toml")
    assert shipped.nproc == (1, 2) and shipped.scaling == ("weak", "strong")
    spec = dataclasses.replace(
        shipped,
        models=shipped.models[:1],
        devices=("cpu",),
        batch_sizes=shipped.batch_sizes[:1],
        parallel=shipped.parallel[:1],
        budget=Budget.fixed(3, warmup_steps=1),
        profile=False,
    )
    frame = run_sweep(spec, tmp_path / "run", point_timeout_s=120)
    assert (frame["status"] == "ok").all(), list(frame["error"])
    base = frame[frame["nproc"] == 1]
    assert len(base) == 1  # measured once, not once per scaling
    (rate,) = base["samples_per_s"]
    assert set(frame["scaling_baseline_samples_per_s"]) == {rate}
    for _, row in frame[frame["nproc"] == 2].iterrows():
        assert row["scaling_efficiency"] == pytest.approx(row["samples_per_s"] / (2 * rate))


def test_a_folder_of_before_with_two_baselines_sets_both_scalings_against_the_first() -> None:
    weak1, strong1 = _row(1, "weak", 100.0), _row(1, "strong", 35.0)
    weak2, strong2 = _row(2, "weak", 180.0), _row(2, "strong", 150.0)
    scaling.fill_efficiency([weak1, weak2, strong1, strong2])
    assert {r["scaling_baseline_samples_per_s"] for r in (weak2, strong2)} == {100.0}
    assert strong2["scaling_efficiency"] == pytest.approx(0.75)


def test_strong_scaling_splits_the_global_batch_over_the_world() -> None:
    two_nodes = Point("mlp", "tiny", "cpu", "fp32", "sgd", 64, parallel="ddp", nproc=1)
    two_nodes = dataclasses.replace(two_nodes, scaling="strong", nodes=2)
    assert two_nodes.world_size == 2 and per_process_batch(two_nodes) == 32
    odd = dataclasses.replace(two_nodes, batch_size=63)
    assert "divisible by nproc * nodes" in str(unsupported_reason(odd))
    assert two_nodes.key() != dataclasses.replace(two_nodes, nodes=1).key()
    assert "on 2 nodes" in two_nodes.label()


def test_a_launch_on_two_nodes_gives_each_scaling_a_point_of_its_world() -> None:
    spec = SweepSpec("s", models=("mlp",), devices=("cpu",), batch_sizes=(8,), parallel=("ddp",))
    spec = dataclasses.replace(spec, nproc=(1,), scaling=("weak", "strong"))
    points = spec.on_nodes(spec.points(), 2)
    assert [(p.nproc, p.nodes, p.scaling) for p in points] == [(1, 2, "weak"), (1, 2, "strong")]
    assert spec.on_nodes(spec.points(), 1) == spec.points()


def test_a_row_of_two_nodes_is_set_against_one_process_on_one_node() -> None:
    base = _row(1, None, 100.0)
    two_nodes = _row(1, "strong", 150.0, point={"nodes": 2})
    # written before issue 23: one process per node on two nodes, no `nodes` in the row
    old = _row(1, "strong", 150.0, world_size=2)
    del old["nodes"]
    scaling.fill_efficiency([base, two_nodes, old])
    for row in (two_nodes, old):
        assert row["scaling_efficiency"] == pytest.approx(0.75)  # not 1.0 against itself
    assert base["scaling_efficiency"] == 1.0


def test_an_efficiency_from_a_noisy_row_or_baseline_says_so() -> None:
    rows = [_row(1, None, 100.0), _row(2, "weak", 180.0), _row(2, "strong", 150.0, noisy=True)]
    scaling.fill_efficiency(rows)
    assert [r["scaling_efficiency_noisy"] for r in rows] == [False, False, True]
    rows = [_row(1, None, 100.0, noisy=True), _row(2, "weak", 180.0)]
    scaling.fill_efficiency(rows)
    assert rows[1]["scaling_efficiency_noisy"] is True


def test_efficiency_is_never_across_machines_unless_asked_for() -> None:
    def rows() -> list[dict[str, Any]]:
        # a baseline of the same scaling, so that only the machines tell the rows apart
        return [_row(1, "weak", 100.0) | {"host": "a"}, _row(2, "weak", 150.0) | {"host": "b"}]

    apart = rows()
    scaling.fill_efficiency(apart)
    assert apart[1]["scaling_efficiency"] is None
    joined = rows()
    scaling.fill_efficiency(joined, across_machines=True)
    assert joined[1]["scaling_efficiency"] == pytest.approx(0.75)
    same = [_row(1, None, 100.0) | {"host": "a"}, _row(2, "weak", 150.0) | {"host": "a"}]
    scaling.fill_efficiency(same)
    assert same[1]["scaling_efficiency"] == pytest.approx(0.75)
    old = [_row(1, None, 100.0), _row(2, "weak", 150.0)]  # rows without a host: one machine
    for r in old:
        r.pop("host", None)
    scaling.fill_efficiency(old)
    assert old[1]["scaling_efficiency"] == pytest.approx(0.75)
