"""issue 51, item 4: the noise phase measures B_noise on a reference model's real data after a
warm-up window, noise.json records it (reader beside writer), and a speed sweep's verdict
predicts the fastest to target from it. The one test that trains: ~1 s of mlp/tiny on digits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from report_fixture import env, speed_row, write_run

from gpubench.cli import main
from gpubench.config.spec import Point
from gpubench.science.noise_phase import measure
from gpubench.store import noise_record
from gpubench.store.noise_record import NoiseEntry, NoiseRecord
from gpubench.store.typed_json import RecordError


def test_a_noise_phase_makes_a_speed_sweeps_fastest_to_target_predicted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # bounded in steps, not seconds, so a busy machine measures the same steps
    entry = measure("mlp", "tiny", "adamw", budget_s=60.0, warmup_steps=6, max_steps=12)
    assert entry is not None and entry.dataset == "digits" and entry.kind == "preconditioned"
    # taken after the warm-up window, every other step
    assert (entry.first_step, entry.last_step, entry.steps) == (6, 10, 3)
    assert entry.b_noise > 0 and entry.cost_s >= entry.train_s > 0
    # speed rows on synthetic batches (no B_noise of their own) beside the phase's record
    rng = np.random.default_rng(0)
    rows = [
        speed_row(Point("mlp", "tiny", "cpu", "fp32", "adamw", b), 1e-3, 2e-5, rng)
        for b in (8, 32, 128, 512)
    ]
    run = write_run(tmp_path / "speed", rows, env())
    assert main(["explain", str(run), "--json"]) == 0
    (v,) = json.loads(capsys.readouterr().out)["verdicts"]
    assert v["fastest_to_target"]["predicted"] is None  # no record: not predicted
    NoiseRecord((entry,)).write(run)
    assert noise_record.read(run) == NoiseRecord((entry,))  # the reader reads what was written
    assert main(["explain", str(run), "--json"]) == 0
    (v,) = json.loads(capsys.readouterr().out)["verdicts"]
    got = v["fastest_to_target"]
    assert got["predicted"] == "predicted" and got["b_noise"] == pytest.approx(entry.b_noise)
    assert got["where"] == entry.where() and "noise phase on digits" in got["where"]
    assert got["cell"].startswith(f"B={got['batch']} predicted")


def test_a_noise_record_of_another_shape_is_refused_in_one_line(tmp_path: Path) -> None:
    good = NoiseEntry(
        "cnn", "small", "sgd", "cpu", "digits", 32, 41.0, 20.0, None, "raw", 8, 40, 17, 2.9, 3.4
    )
    NoiseRecord((good,)).write(tmp_path)
    data = json.loads((tmp_path / noise_record.FILE).read_text())
    data["entries"][0]["kind"] = "simple"
    (tmp_path / noise_record.FILE).write_text(json.dumps(data))
    with pytest.raises(RecordError, match="kind 'simple' is not one of preconditioned, raw"):
        noise_record.read(tmp_path)
