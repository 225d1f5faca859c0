"""A run folder written under an old schema reads in today's columns (store.results.upgraded):
the old `mfu` (the matmul roof fraction) becomes matmul_roof_fraction, `mfu` is recomputed from
the row's own tflops and datasheet peak, and a renamed column takes its new name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpubench.store.results import load_results

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


def test_an_old_folder_reads_in_todays_columns(tmp_path: Path) -> None:
    frame = load_results(_old_folder(tmp_path)).set_index("model")
    cuda, cpu = frame.loc["transformer"], frame.loc["mlp"]
    assert cuda["matmul_roof_fraction"] == pytest.approx(0.537)
    assert cuda["mfu"] == pytest.approx(423.0 / 989.0)
    assert cpu["matmul_roof_fraction"] == pytest.approx(0.531)
    assert pd.isna(cpu["mfu"])  # no datasheet peak: no MFU, never the roof fraction
    assert cuda["step_time_sum_s"] == pytest.approx(2.5)
    assert "step_time_device_sum_s" not in frame.columns
