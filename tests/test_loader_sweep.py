"""The loader data mode through the sweep (issue 31): a crashing loader worker gives its point an
`error` row with the worker's traceback and the sweep goes on; the command line's loader sweep
names the input share of the step and the worker lever in its verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpubench.cli import main
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.run.sweep import run_sweep

BUDGET = Budget(**{**Budget.fixed(steps=4, warmup_steps=1).__dict__, "profile_steps": 0})


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow  # a sweep with loader workers
def test_a_crashing_worker_is_an_error_row_with_its_traceback_and_the_sweep_goes_on(
    tmp_path: Path,
) -> None:
    # the data set raises only in a loader worker: the 0-worker point loads in the training
    # process and runs; the 1-worker point's worker crashes (one worker, not two: one is enough
    # to crash, and each costs a process)
    spec = SweepSpec(
        "crash",
        ("mlp",),
        size="tiny",
        devices=("cpu",),
        batch_sizes=(8,),
        data="loader",
        loader_workers=(1, 0),
        loader="loader_datasets:crashing",
        budget=BUDGET,
    )
    # no confirmation: it writes no row, and this sweep's one ok row has no rival to confirm
    run_sweep(spec, tmp_path / "run", point_timeout_s=120, confirm=False)
    rows = {r["loader_workers"]: r for r in _rows(tmp_path / "run")}
    assert rows[1]["status"] == "error"
    assert "ValueError" in rows[1]["error"] and "DataLoader worker" in rows[1]["error"]
    assert "sample" in rows[1]["traceback"] and "is corrupt" in rows[1]["traceback"]
    assert rows[0]["status"] == "ok", rows[0]["error"]


@pytest.mark.slow  # a sweep with loader workers
def test_the_loader_sweep_names_the_input_share_and_the_worker_lever(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["sweep", "--models", "mlp", "--size", "tiny", "--data", "loader"]
    args += ["--loader-workers", "0,2", "--devices", "cpu", "--batch-sizes", "16"]
    args += ["--precisions", "fp32", "--optimizers", "sgd", "--steps", "4", "--no-profile"]
    assert main([*args, "--no-confirm", "--quiet", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    rows = _rows(out)
    assert sorted(r["loader_workers"] for r in rows) == [0, 2]
    assert all(r["status"] == "ok" and r["loader_dataset"].startswith("digits PNG") for r in rows)
    assert "input: the fastest waits " in text and "% of the step for its batch" in text
    assert re.search(r"input: 2 workers: x[\d.,]+ the samples/s of 0 workers", text), text


def test_loader_axes_without_loader_data_are_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["sweep", "--models", "mlp", "--loader-workers", "2", "--out", str(tmp_path / "r")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "loader_workers [2] with data 'device'" in err
    assert not (tmp_path / "r").exists()


def test_a_hung_worker_ends_its_point_with_the_loaders_timeout() -> None:
    from gpubench.harness.point import measure_point

    point = Point(
        "mlp", "tiny", "cpu", "fp32", "sgd", 8, data="loader", loader_workers=1,
        pin_memory=False, prefetch=2, persistent_workers=True, loader="loader_datasets:hanging",
    )  # fmt: skip
    with pytest.raises(RuntimeError, match="DataLoader timed out after 2 seconds"):
        measure_point(point, BUDGET)


def test_a_worker_out_of_memory_is_the_points_out_of_memory() -> None:
    from gpubench.harness.failure import is_out_of_memory
    from gpubench.harness.point import measure_point

    point = Point(
        "mlp", "tiny", "cpu", "fp32", "sgd", 8, data="loader", loader_workers=1,
        pin_memory=False, prefetch=2, persistent_workers=True, loader="loader_datasets:hungry",
    )  # fmt: skip
    with pytest.raises(MemoryError, match="DataLoader worker") as raised:
        measure_point(point, BUDGET)
    assert is_out_of_memory(raised.value)  # the sweep's rule: the row's status is `oom`
