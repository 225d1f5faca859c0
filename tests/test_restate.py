"""Restating a run folder written under an old schema (issue 21, item 8): the files themselves
hold today's columns, the rewrite is recorded in the folder, a second run changes nothing, and
the loader reads the same values as before."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpubench.store.restate import RECORD, missing_as_none, restate
from gpubench.store.results import load_results
from gpubench.store.row import COLUMNS, SERIES

# Two rows as a sweep wrote them before matmul_roof_fraction existed: `mfu` held the fraction of
# the measured matmul roof, the device step-time sum had its old name, and many of today's
# columns did not exist yet. Only the CUDA row has a datasheet peak.
OLD_ROWS: list[dict[str, Any]] = [
    {
        "model": "transformer",
        "model_size": "base",
        "device": "cuda",
        "precision": "bf16",
        "optimizer": "adamw",
        "batch_size": 32,
        "seed": 0,
        "status": "ok",
        "step_time_s": 0.25,
        "step_time_device_sum_s": 2.5,
        "tflops": 423.0,
        "peak_tflops": 787.0,
        "datasheet_peak_tflops": 989.0,
        "mfu": 0.537,
        "step_times_s": [0.25, 0.251, 0.249],
    },
    {
        "model": "mlp",
        "model_size": "small",
        "device": "cpu",
        "precision": "fp32",
        "optimizer": "sgd",
        "batch_size": 64,
        "seed": 0,
        "status": "ok",
        "step_time_s": 0.0138,
        "step_time_device_sum_s": None,
        "tflops": 0.0365,
        "peak_tflops": 0.0687,
        "datasheet_peak_tflops": None,
        "mfu": 0.531,
        "step_times_s": [0.0138, 0.0139],
    },
]


def _old_folder(tmp_path: Path) -> Path:
    run = tmp_path / "20261122-old"
    run.mkdir()
    lines = "".join(json.dumps(r) + "\n" for r in OLD_ROWS)
    (run / "results.jsonl").write_text(lines, encoding="utf-8")
    # The old CSV: `mfu` is the roof fraction there, and no matmul_roof_fraction column.
    old_csv = pd.DataFrame([{k: v for k, v in r.items() if k != "step_times_s"} for r in OLD_ROWS])
    old_csv.to_csv(run / "results.csv", index=False)
    return run


def _file_rows(run: Path) -> list[dict[str, Any]]:
    lines = (run / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_restated_files_hold_todays_schema(tmp_path: Path) -> None:
    run = _old_folder(tmp_path)
    restate(run, commit="abc123", today="2026-11-23")
    cuda, cpu = _file_rows(run)
    # Every schema column in order, then the raw series.
    assert list(cuda)[: len(COLUMNS)] == COLUMNS and "step_times_s" in cuda
    assert "step_time_device_sum_s" not in cuda and cuda["step_time_sum_s"] == 2.5
    # The roof fraction moved to its own column; mfu is the datasheet fraction, null without one.
    assert cuda["matmul_roof_fraction"] == 0.537 and cuda["mfu"] == pytest.approx(423.0 / 989.0)
    assert cpu["matmul_roof_fraction"] == 0.531 and cpu["mfu"] is None
    # Nothing re-measured: every other value is the one written, the raw series too.
    for old, new in zip(OLD_ROWS, (cuda, cpu), strict=True):
        for key, value in old.items():
            if key not in ("mfu", "step_time_device_sum_s"):
                assert new[key] == value, key
    # Columns that did not exist are null, never a guess.
    assert cuda["busy"] is None and cuda["bottleneck"] is None and cuda["threads"] is None
    # The CSV is the new rows': a reader of it gets today's meaning.
    csv = pd.read_csv(run / "results.csv")
    assert list(csv.columns) == [c for c in COLUMNS] and not set(SERIES) & set(csv.columns)
    assert csv.loc[0, "mfu"] == pytest.approx(423.0 / 989.0) and pd.isna(csv.loc[1, "mfu"])
    assert list(csv["matmul_roof_fraction"]) == [0.537, 0.531]


def test_the_rewrite_is_recorded(tmp_path: Path) -> None:
    run = _old_folder(tmp_path)
    restate(run, commit="abc123", today="2026-11-23")
    record = json.loads((run / RECORD).read_text(encoding="utf-8"))
    (entry,) = record["restatements"]
    assert entry["date"] == "2026-11-23" and entry["gpubench_commit"] == "abc123"
    assert entry["rows"] == 2 and "re-measured" in entry["note"]
    columns = entry["columns"]
    assert columns["mfu"]["rows_changed"] == 2 and "datasheet" in columns["mfu"]["change"]
    assert columns["matmul_roof_fraction"]["rows_changed"] == 2
    assert columns["step_time_sum_s"]["rows_changed"] == 2
    assert "step_time_device_sum_s" in columns["step_time_sum_s"]["change"]
    assert "busy" in entry["columns_added_null"] and "mfu" not in entry["columns_added_null"]


def test_a_second_run_changes_nothing(tmp_path: Path) -> None:
    run = _old_folder(tmp_path)
    assert restate(run, commit="abc123", today="2026-11-23") is not None
    files = {p.name: p.read_bytes() for p in run.iterdir()}
    assert restate(run, commit="def456", today="2026-12-01") is None
    assert {p.name: p.read_bytes() for p in run.iterdir()} == files


def test_the_loader_reads_the_same_values(tmp_path: Path) -> None:
    run = _old_folder(tmp_path)
    before = load_results(run)
    restate(run, commit="abc123", today="2026-11-23")
    after = load_results(run)
    # The loader upgraded the old rows on read; the restated rows need no upgrade and read alike
    # (a column the old rows lacked is None now where the loader filled NaN: both are missing).
    pd.testing.assert_frame_equal(missing_as_none(before), missing_as_none(after))


def test_a_folder_in_todays_schema_is_left_alone(tmp_path: Path) -> None:
    run = _old_folder(tmp_path)
    restate(run, commit="abc123", today="2026-11-23")
    (run / RECORD).unlink()
    assert restate(run, commit="abc123", today="2026-11-23") is None
    assert not (run / RECORD).exists()


def test_the_record_names_the_checkouts_commit(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    entry = restate(_old_folder(tmp_path))
    assert entry is not None and entry["gpubench_commit"].removesuffix("-dirty") == head
