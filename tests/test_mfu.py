"""MFU against the datasheet peak, the measured roof under its own name, and rows written before
that split: hand-computed figures, not the code's own formula."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gpubench.config.spec import Point
from gpubench.store.results import load_results
from gpubench.store.row import make_row


def test_rows_written_before_the_split_load_with_mfu_against_the_datasheet(
    tmp_path: Path,
) -> None:
    gpu = make_row(Point("mlp", "base", "cuda", "bf16", "sgd", 16), "ok")
    cpu = make_row(Point("mlp", "base", "cpu", "fp32", "sgd", 16), "ok")
    old = []
    # an H100 row: 494.7 TFLOP/s achieved, 772 measured roof, 989.4 datasheet
    for row, tflops, roof, sheet in ((gpu, 494.7, 772.0, 989.4), (cpu, 0.5, 1.0, None)):
        row = {k: v for k, v in row.items() if k != "matmul_roof_fraction"}
        row.update(tflops=tflops, peak_tflops=roof, datasheet_peak_tflops=sheet)
        row["mfu"] = tflops / roof  # what `mfu` meant then
        old.append(row)
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    frame = load_results(tmp_path).set_index("device")
    assert frame.loc["cuda", "mfu"] == pytest.approx(0.5)
    assert frame.loc["cuda", "matmul_roof_fraction"] == pytest.approx(494.7 / 772.0)
    assert pd.isna(frame.loc["cpu", "mfu"]) and frame.loc["cpu", "matmul_roof_fraction"] == 0.5
