"""batch_sizes = "auto" per parallel layout and one plan for every shard (issue 23): what a rank
is searched as, the batch sizes in each point's own semantics, and a plan file that a second
shard reads instead of searching again."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from isolation import cap_text, memory_cap, rows

from gpubench.cli import main
from gpubench.config.spec import Point, SweepSpec
from gpubench.run import batch_plan
from gpubench.run.context import RunOptions
from gpubench.run.sweep import plan

BASE = Point("mlp", "tiny", "cpu", "fp32", "adamw", 1)


def search_key(point: Point) -> str:
    """maxbatch.json's key of the search `point`'s auto batch sizes come from."""
    return batch_plan.rank_layout(point).key()


def layout(parallel: str, nproc: int, scaling: str = "weak") -> Point:
    return dataclasses.replace(BASE, parallel=parallel, nproc=nproc, scaling=scaling)


def test_each_rank_is_searched_as_the_single_process_its_layout_makes() -> None:
    single = search_key(BASE)
    assert single == " ".join(f"{k}={v}" for k, v in BASE.to_dict().items() if k != "batch_size")
    # every layout whose ranks hold what a single process holds shares its search
    assert search_key(layout("fsdp", 1)) == single
    ddp = {search_key(layout("ddp", n, s)) for n in (1, 2, 4) for s in ("weak", "strong")}
    assert len(ddp) == 1 and single not in ddp  # DDP's buckets: one more copy of the gradients
    fsdp = [search_key(layout("fsdp", n)) for n in (2, 4)]
    assert len({*fsdp, single}) == 3  # each world shards the state its own way
    assert search_key(layout("fsdp", 2, "strong")) == fsdp[0]
    row = {
        "memory_parameters_bytes": 100,
        "memory_gradients_bytes": 100,
        "memory_optimizer_bytes": 200,
    }
    assert batch_plan.rank_layout(layout("ddp", 2)).saved_bytes(row) == -100
    assert batch_plan.rank_layout(layout("fsdp", 4)).saved_bytes(row) == 300
    assert batch_plan.rank_layout(BASE).saved_bytes(row) == 0


def test_auto_batch_sizes_are_in_each_points_own_batch_size() -> None:
    assert batch_plan.batch_sizes(BASE, 40) == [1, 2, 4, 8, 16, 32]
    assert batch_plan.batch_sizes(layout("ddp", 2), 40) == [1, 2, 4, 8, 16, 32]
    # strong scaling's batch_size is the global batch: nproc ranks of the per-rank sizes
    assert batch_plan.batch_sizes(layout("ddp", 2, "strong"), 40) == [2, 4, 8, 16, 32, 64]
    assert batch_plan.batch_sizes(layout("fsdp", 4, "strong"), 0) == [4]


@pytest.mark.slow  # two batch searches of two-rank layouts
def test_a_rank_is_searched_against_the_memory_its_layout_frees_or_takes() -> None:
    """ddp x1 and x2 strong answered the same global 9056 (issue 23): the search is per rank,
    DDP takes a copy of the gradients, FSDP x2 frees half the state."""
    spec = SweepSpec(
        name="layouts",
        models=("stateful_workloads:stateful",),
        size="tiny",
        devices=("cpu",),
        batch_sizes="auto",
        precisions=("fp32",),
        optimizers=("adamw",),
        parallel=("ddp", "fsdp"),
        nproc=(2,),
        scaling=("weak", "strong"),
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        points = plan(spec, Path(tmp), RunOptions(memory_cap(640), None))
        searches = json.loads((Path(tmp) / "maxbatch.json").read_text())
    largest = {}
    for mode in ("ddp", "fsdp"):
        key = search_key(dataclasses.replace(layout(mode, 2), model="stateful_workloads:stateful"))
        largest[mode] = searches[key]["largest_batch"]
        saved = searches[key]["rank_saved_bytes"]
        state = 4 * 12 * 2**20  # the parameters' bytes (tests/stateful_workloads.py)
        assert saved == pytest.approx({"ddp": -state, "fsdp": 2 * state}[mode], 0.05)
    assert len(searches) == 2, list(searches)
    # 48 MiB more for DDP, 96 MiB less for FSDP x2: about 36 samples of 4 MiB between them
    assert largest["fsdp"] - largest["ddp"] > 16, largest

    def sizes(mode: str, scaling: str | None) -> list[int]:
        return [p.batch_size for p in points if p.parallel == mode and p.scaling == scaling]

    assert sizes("ddp", "weak") == [2**i for i in range(largest["ddp"].bit_length())]
    assert sizes("ddp", "strong") == [2 * b for b in sizes("ddp", "weak")]
    assert sizes("fsdp", "strong") == [2 * b for b in sizes("fsdp", "weak")]


AUTO = """
name = "auto"
models = ["fault_workloads:hungry"]
size = "tiny"
devices = ["cpu"]
batch_sizes = "auto"
precisions = ["fp32"]
optimizers = ["sgd"]
"""


@pytest.mark.slow  # two shards' sweeps
def test_two_shards_given_one_plan_measure_one_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every shard searched on its own, and two runs planned 9056 and 9632 for one model
    (issue 23): with --plan FILE the first shard searches into FILE, the second reads it."""
    suite = tmp_path / "auto.toml"
    suite.write_text(AUTO)
    plan_file = tmp_path / "plan.json"
    args = ["sweep", str(suite), "--quiet", "--steps", "1", "--max-memory", cap_text()]
    # no profile, no report (its verdict is still printed): what is checked is the plan and
    # the rows (issue 49: the two shards' HTML reports took 4.5 s of the test's 22 at load 2.3)
    args += ["--no-profile", "--no-report"]
    # without a plan each shard would search alone: refused before anything is written
    assert main([*args, "--shard", "1/2", "--out", str(tmp_path / "alone")]) == 2
    assert "--plan FILE" in capsys.readouterr().err and not (tmp_path / "alone").exists()

    one, two = tmp_path / "one", tmp_path / "two"
    assert main([*args, "--shard", "1/2", "--plan", str(plan_file), "--out", str(one)]) == 0
    searched = plan_file.read_bytes()
    assert len(json.loads(searched)) == 1
    assert main([*args, "--shard", "2/2", "--plan", str(plan_file), "--out", str(two)]) == 0
    assert plan_file.read_bytes() == searched, "the second shard searched again"
    assert json.loads((two / "maxbatch.json").read_text()) == json.loads(searched)
    measured = sorted(r["batch_size"] for r in [*rows(one), *rows(two)])
    assert rows(one) and rows(two)
    spec = SweepSpec(
        name="auto",
        models=("fault_workloads:hungry",),
        size="tiny",
        devices=("cpu",),
        batch_sizes="auto",
        precisions=("fp32",),
        optimizers=("sgd",),
    )
    options = RunOptions(point_timeout_s=None, shard=(1, 2), plan_file=plan_file)
    planned = plan(spec, tmp_path / "reader", options)
    assert plan_file.read_bytes() == searched
    assert measured == sorted(p.batch_size for p in planned)  # each point once
