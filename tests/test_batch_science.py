from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpubench.config.spec import Point
from gpubench.science.batch_analysis import analyse, fit_hyperbola, write_analysis
from gpubench.store.results import ResultStore
from gpubench.store.row import make_row


def test_hyperbola_fit_recovers_known_parameters() -> None:
    b = [8, 16, 32, 64, 128, 256, 512]
    s_min, b_crit = 120.0, 50.0
    exact = fit_hyperbola(b, [s_min * (1 + b_crit / x) for x in b])
    assert exact["valid"] and exact["s_min"] == pytest.approx(s_min)
    assert exact["b_crit"] == pytest.approx(b_crit) and exact["rel_rmse"] < 1e-9
    rng = np.random.default_rng(0)
    noisy = [s_min * (1 + b_crit / x) * (1 + 0.03 * rng.standard_normal()) for x in b]
    fit = fit_hyperbola(b, noisy)
    assert fit["s_min"] == pytest.approx(s_min, rel=0.1)
    assert fit["b_crit"] == pytest.approx(b_crit, rel=0.15)


def test_hyperbola_fit_refuses_data_of_another_shape() -> None:
    assert not fit_hyperbola([32], [10.0])["valid"]
    rising = fit_hyperbola([8, 64, 512], [10.0, 20.0, 40.0])
    assert not rising["valid"] and rising["b_crit"] is None


def _row(b: int, seed: int, steps: int | None, step_s: float, status: str = "ok") -> dict:
    point = Point("mlp", "tiny", "cpu", "fp32", "sgd", b, seed, "device", lr_scaling="linear")
    if status != "ok":
        return make_row(point, status)
    return make_row(
        point,
        "ok",
        steps_to_target=steps,
        samples_to_target=None if steps is None else steps * b,
        time_to_target_s=None if steps is None else steps * step_s,
        step_time_s=step_s,
        samples_per_s=b / step_s,
        dataset="digits",
        target_metric="eval_accuracy",
        target=0.9,
    )


def test_analysis_recommends_the_fastest_batch_and_compares(tmp_path: Path) -> None:
    # steps S = 100 (1 + 64/B); step time 1 ms up to B=64, then proportional to B
    rows = []
    for b in (8, 32, 128, 512):
        step_s = 1e-3 * max(1, b / 64)
        for seed, jitter in ((0, 0), (1, 2)):
            rows.append(_row(b, seed, round(100 * (1 + 64 / b)) + jitter, step_s))
    rows.append(_row(1024, 0, None, 0, status="oom"))
    store = ResultStore(tmp_path)
    for r in rows:
        store.append(r)
    (entry,) = analyse(pd.DataFrame(rows))
    assert entry["s_min"] == pytest.approx(100, rel=0.02)
    assert entry["b_crit"] == pytest.approx(64, rel=0.05)
    per = {p["batch_size"]: p for p in entry["per_batch"]}
    assert per[32]["steps_to_target"]["n"] == 2 and per[32]["steps_to_target"]["max"] == 302
    assert per[32]["steps_to_target"]["std"] == pytest.approx(np.std([300, 302], ddof=1))
    # time: B=8 900 steps x 1 ms, B=32 300 x 1 ms, B=128 150 x 2 ms, B=512 112.5 x 8 ms
    assert entry["recommended_batch_size"] == 32
    assert entry["throughput_optimal_batch_size"] == 128  # samples/s saturates above B=64
    assert entry["largest_batch_fits"] == 512 and entry["oom_batch_sizes"] == [1024]
    assert "throughput-optimal B=128 takes" in entry["comparison"]
    path = write_analysis(tmp_path)
    assert json.loads(path.read_text())["groups"][0]["recommended_batch_size"] == 32


def test_the_analysis_and_its_tables_state_b_noise_and_read_an_old_b_simple() -> None:
    from rich.console import Console

    from gpubench.cli.convergence_table import batch_table, points_table

    def text(table: object) -> str:
        console = Console(width=300, record=True)
        console.print(table)
        return console.export_text()

    new = []
    for b, value in ((8, 40.0), (32, 90.0)):
        r = _row(b, 0, 100, 1e-3)
        # AdamW's rows carry both; the analysis states the preconditioned one
        r.update(
            optimizer="adamw",
            noise_scale_b_noise=value / 3,
            noise_scale_b_noise_preconditioned=value,
            noise_scale_first_step=2,
            noise_scale_last_step=38,
        )
        new.append(r)
    (entry,) = analyse(pd.DataFrame(new))
    assert entry["b_noise_kind"] == "preconditioned"
    assert entry["b_noise"] == pytest.approx(60.0)  # geometric mean across the two runs
    assert entry["b_noise_where"] == "steps 2-38 of 2 convergence runs, across them"
    assert [p["noise_scale_b_noise_preconditioned"] for p in entry["per_batch"]] == [40, 90]
    assert entry["noise_scale_b_simple"] is None
    assert "60 (precond.)" in text(batch_table([entry]))
    assert "90 (precond.)" in text(points_table(pd.DataFrame(new)))
    # an old folder's rows: the extra-pass figure, under its own name
    old = [{**_row(b, 0, 100, 1e-3), "noise_scale_b_simple": 4.1} for b in (8, 32)]
    for r in old:
        r.pop("noise_scale_b_noise", None)
    (was,) = analyse(pd.DataFrame(old))
    assert was["b_noise"] is None and was["noise_scale_b_simple"] == pytest.approx(4.1)
    assert "4.1 (B_simple)" in text(batch_table([was]))
    assert "4.1 (B_simple)" in text(points_table(pd.DataFrame(old)))
