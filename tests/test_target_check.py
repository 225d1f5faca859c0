"""issue 51, item 5: a predicted fastest to target checked by training (science.target_check):
which batches train, what the runs say against the prediction, and that the terminal, the
report and explain --json quote it alike, on synthetic runs (no training here;
tests/test_noise_phase.py runs a sweep with --confirm-target end to end)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from report_fixture import env, speed_row, write_run

from gpubench.cli import console, main
from gpubench.config.spec import Point
from gpubench.config.suite import load_suite, target_settings
from gpubench.report import goodput_chart
from gpubench.report.html import e
from gpubench.run import target_confirm
from gpubench.science import goodput
from gpubench.science.fastest_to_target import NoiseEstimate, answer
from gpubench.science.target_check import (
    CONFIRMED,
    MISSED,
    UNSETTLED,
    batches_for,
    check_of,
    trained_key,
)
from gpubench.store import target_runs
from gpubench.store.noise_record import NoiseEntry, NoiseRecord
from gpubench.store.row import make_row
from gpubench.store.wording import times

LEADER = Point("cnn", "small", "cpu", "bf16", "adamw", 512)
RATES = {8: 1_000.0, 32: 3_000.0, 128: 6_000.0, 512: 8_000.0}


def _run(batch: int, seed: int, reached_s: float | None, status: str = "ok") -> dict[str, Any]:
    """A run to the target as run.target_confirm trains it: the leader's settings with the
    batch, seed, rule and data changed."""
    p = dataclasses.replace(LEADER, batch_size=batch, seed=seed, lr_scaling="sqrt", data="device")
    return make_row(
        p,
        status,
        time_to_target_s=reached_s,
        steps_to_target=None if reached_s is None else round(reached_s * 100),
        target_metric="eval_accuracy",
        target=0.95,
        dataset="digits",
    )


def _runs(times: dict[int, list[float | None]]) -> list[dict[str, Any]]:
    return [_run(b, s, t) for b, ts in times.items() for s, t in enumerate(ts)]


def test_the_pick_the_throughput_batch_and_the_one_between_are_trained() -> None:
    def pick(b_noise: float) -> goodput.GoodputPick:
        return goodput.pick(RATES, b_noise)

    assert pick(200.0).batch == 128 and pick(200.0).throughput_batch == 512
    assert batches_for(pick(200.0)) == (128, 512)  # neighbours: nothing between
    assert pick(1.0).batch == 8
    assert batches_for(pick(1.0)) == (8, 32, 512)  # the pick's neighbour toward throughput
    # (a pick above the throughput batch cannot come from goodput.pick; the rule holds anyway)
    top = goodput.pick({8: 9_000.0, 32: 8_000.0, 128: 7_900.0}, 1e9)
    assert batches_for(dataclasses.replace(top, batch=128)) == (8, 32, 128)
    # a limit (the data set's training samples): the largest batch under it stands in for the
    # throughput-fastest batch above it, and a pick above it trains nothing
    wide = goodput.pick({**RATES, 2048: 9_000.0, 4096: 9_500.0}, 1.0)
    assert (wide.batch, wide.throughput_batch) == (8, 4096)
    assert batches_for(wide, 1438) == (8, 32, 512)
    assert batches_for(dataclasses.replace(wide, batch=4096), 1438) == ()
    # the pick is the throughput-fastest: it and its neighbours, so the runs can refute it
    assert pick(1e9).batch == 512 and batches_for(pick(1e9)) == (128, 512)
    middle = goodput.pick({8: 1.0, 32: 9.0, 128: 2.0}, 1.0)
    assert middle.batch == 32 == middle.throughput_batch
    assert batches_for(middle) == (8, 32, 128)


def test_a_run_keys_to_the_leader_it_trains_and_no_other() -> None:
    assert trained_key(_run(8, 2, 1.0)) == trained_key(LEADER.to_dict())
    other = dataclasses.replace(LEADER, precision="fp32")
    assert trained_key(other.to_dict()) != trained_key(LEADER.to_dict())


def test_the_predicted_batch_trained_fastest_is_confirmed_with_both_gains() -> None:
    p = goodput.pick(RATES, 200.0)
    runs = _runs({128: [1.0, 1.2, 1.1], 512: [2.0, 1.9, 2.2]})
    got = check_of(p, LEADER.to_dict(), runs)
    assert got is not None and got.outcome == CONFIRMED and got.fastest == 128
    assert got.measured_gain == pytest.approx(2.0 / 1.1)
    line = got.line()
    assert line.startswith("confirmed by training (eval_accuracy 0.95 on digits, 3 seeds a batch)")
    assert f"predicted x{p.gain:.2f}, measured x1.82 over B=512" in line
    assert "B=128: 1.10 s median over 3 seeds, 110 steps" in line
    assert got.cell() == "confirmed (measured x1.82)"
    assert "contended" not in line and got.contended == 0
    d = got.to_dict()
    assert (d["outcome"], d["fastest"], d["predicted"], d["throughput_batch"]) == (
        CONFIRMED,
        128,
        128,
        512,
    )
    assert d["batches"]["512"]["median"] == 2.0 and d["text"] == line
    # runs of another configuration are not this leader's
    assert check_of(p, dataclasses.replace(LEADER, precision="fp32").to_dict(), runs) is None


def test_another_batch_trained_fastest_is_a_miss_with_both_figures() -> None:
    p = goodput.pick(RATES, 1.0)  # predicts B=8
    assert p.batch == 8
    runs = _runs({8: [3.0, 3.1, 2.9], 32: [1.0, 1.1, 1.2], 512: [2.0, 2.0, 2.0]})
    got = check_of(p, LEADER.to_dict(), runs)
    assert got is not None and got.outcome == MISSED and got.fastest == 32
    assert got.line().startswith(
        "the prediction missed (eval_accuracy 0.95 on digits, 3 seeds a batch): B=32 trained "
        "fastest of B=8, B=32, B=512, not the predicted B=8 (x2.73 by the medians, outside "
        "the seeds' spread); predicted x"
    )
    assert "measured x0.667 over B=512" in got.line()  # the throughput answer was faster
    # by how much, and that the seeds do not overlap (B=8's fastest 2.9 s > B=32's slowest 1.2)
    assert got.cell() == "missed: B=32 trained fastest (x2.73)"
    assert (got.to_dict()["miss_factor"], got.to_dict()["within_spread"]) == (
        pytest.approx(3.0 / 1.1),
        False,
    )
    # runs that shared their cores say so beside their figures
    runs[0]["busy"] = runs[4]["busy"] = True
    busy = check_of(p, LEADER.to_dict(), runs)
    assert busy is not None and busy.to_dict()["contended_runs"] == 2
    assert busy.line().endswith(
        "; 2 of 9 runs contended (other processes shared their cores: their times to target "
        "are slower and noisier than this machine's, their steps are not)"
    )


def test_a_miss_inside_the_seeds_spread_says_they_overlap() -> None:
    p = goodput.pick(RATES, 1.0)  # predicts B=8
    # B=32 is faster by the medians (1.1 against 1.2 s), but B=8's fastest seed (1.0 s) is no
    # slower than B=32's slowest (1.3 s): the seeds do not tell the two apart
    runs = _runs({8: [1.2, 1.0, 1.5], 32: [1.1, 0.9, 1.3], 512: [2.0, 2.0, 2.0]})
    got = check_of(p, LEADER.to_dict(), runs)
    assert got is not None and got.outcome == MISSED and got.fastest == 32
    assert got.miss_factor == pytest.approx(1.2 / 1.1) and got.within_spread
    assert (
        "not the predicted B=8 (x1.09 by the medians, within the seeds' spread: their times "
        "overlap)" in got.line()
    )
    assert got.cell() == "missed: B=32 trained fastest (x1.09, seeds overlap)"
    # a pick that is itself fastest has no miss to size
    best = check_of(p, LEADER.to_dict(), _runs({8: [0.5, 0.6, 0.7], 32: [1.1, 0.9, 1.3]}))
    assert best is not None and best.outcome == CONFIRMED
    assert best.miss_factor is None and not best.within_spread


def test_a_seed_that_missed_the_target_keeps_its_batch_from_being_fastest() -> None:
    p = goodput.pick(RATES, 200.0)
    runs = _runs({128: [1.0, None, 1.1], 512: [2.0, 1.9, 2.2]})
    got = check_of(p, LEADER.to_dict(), runs)
    assert got is not None and got.outcome == MISSED and got.fastest == 512
    assert got.measured_gain is None and got.miss_factor is None  # B=128 lacks a seed
    assert "not measured (a seed missed the target)" in got.line()
    assert "by the medians" not in got.line()
    assert "B=128: reached the target in only 2 of 3 seeds" in got.line()
    none = check_of(p, LEADER.to_dict(), _runs({128: [None] * 3, 512: [None, 2.0, 2.0]}))
    assert none is not None and none.outcome == UNSETTLED
    assert none.line().startswith("not settled by training (eval_accuracy 0.95 on digits")
    assert none.cell() == "unsettled by training"
    alone = check_of(p, LEADER.to_dict(), _runs({128: [1.0, 1.1, 1.2]}))
    assert alone is not None and alone.outcome == UNSETTLED
    assert "B=128 alone was trained (B=128: 1.10 s median" in alone.line()
    # a first run that failed before recording its target does not blank what was trained to
    failed = make_row(dataclasses.replace(LEADER, lr_scaling="sqrt", data="device"), "oom")
    got = check_of(p, LEADER.to_dict(), [failed, *runs])
    assert got is not None and (got.metric, got.target) == ("eval_accuracy", 0.95)


def test_the_verdicts_answer_carries_the_check_in_its_cell_line_and_json() -> None:
    noise = NoiseEstimate(200.0, 100.0, 400.0, "preconditioned", "steps 100-129")
    runs = _runs({128: [1.0, 1.2, 1.1], 512: [2.0, 1.9, 2.2]})
    leader = LEADER.to_dict()
    got = answer(RATES, noise, "cnn", leader=leader, runs=runs)
    assert got.check is not None
    assert got.cell().endswith(", confirmed (measured x1.82)")
    assert got.check.line() in got.line()
    assert got.to_dict()["confirmed"] == got.check.to_dict()
    # without runs, the answer is the prediction alone
    alone = answer(RATES, noise, "cnn", leader=leader)
    assert alone.check is None and alone.to_dict()["confirmed"] is None
    assert "confirmed" not in alone.cell()


def test_terminal_html_and_explain_json_quote_the_same_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a speed sweep's folder: rows on synthetic batches, its noise phase's B_noise and the runs
    # to the target that --confirm-target trained (store.target_runs), read as any folder is
    rng = np.random.default_rng(0)
    rows = [
        speed_row(dataclasses.replace(LEADER, batch_size=b), 1e-2, 1e-4, rng)
        for b in (8, 32, 128, 512)
    ]
    run = write_run(tmp_path / "run", rows, env())
    entry = NoiseEntry(
        "cnn", "small", "adamw", "cpu", "digits", 16, 200.0, 120.0, 350.0, "preconditioned",
        100, 129, 30, 1.5, 2.0,
    )  # fmt: skip
    NoiseRecord((entry,)).write(run)
    for r in _runs({128: [1.0, 1.2, 1.1], 512: [2.0, 1.9, 2.2]}):
        target_runs.append(run, r)
    assert main(["explain", str(run), "--json"]) == 0
    (v,) = json.loads(capsys.readouterr().out)["verdicts"]
    got = v["fastest_to_target"]
    assert (got["batch"], got["throughput_batch"]) == (128, 512)
    check = got["confirmed"]
    assert check["outcome"] == CONFIRMED and check["measured_gain"] == pytest.approx(2.0 / 1.1)
    assert check["relative_times"] == {"128": 1.0, "512": pytest.approx(2.0 / 1.1)}
    assert got["cell"].endswith(f", confirmed (measured {times(check['measured_gain'])})")
    monkeypatch.setattr(console.stdout, "width", 400)  # the answer table unwrapped
    assert main(["explain", str(run)]) == 0
    printed = capsys.readouterr().out
    assert got["cell"] in printed and check["text"] in " ".join(printed.split())
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    answer_table = page[page.index("<table") : page.index("</table>")]
    assert f"<td>{e(got['cell'])}</td>" in answer_table
    assert e(check["text"]) in page
    assert (run / "plots" / goodput_chart.FILE).stat().st_size > 0


def test_a_batch_above_the_data_sets_training_samples_is_planned_out_and_said(
    tmp_path: Path,
) -> None:
    # mlp/tiny's throughput-fastest B=4096 cannot train on digits' 1438 training samples
    rng = np.random.default_rng(0)
    mlp = Point("mlp", "tiny", "cpu", "fp32", "adamw", 1)
    rows = [
        speed_row(dataclasses.replace(mlp, batch_size=b), 1e-3, 1e-7, rng)
        for b in (256, 1024, 4096)
    ]
    run = write_run(tmp_path / "run", rows, env())
    entry = NoiseEntry(
        "mlp", "tiny", "adamw", "cpu", "digits", 16, 75.0, 45.0, 194.0, "preconditioned",
        100, 129, 30, 0.1, 0.2,
    )  # fmt: skip
    NoiseRecord((entry,)).write(run)
    spec = dataclasses.replace(load_suite("quick"), models=("mlp",), size="tiny")
    with pytest.warns(
        UserWarning, match=r"throughput-fastest B=4096 not trained \(above the 1438 "
    ):
        (planned,) = target_confirm.plan(run, spec)
    assert planned.batches[-1] == 1024  # the largest that fits stands in for B=4096
    points = planned.points()
    assert len(points) == 3 * len(planned.batches)
    assert [p.seed for p in points[: len(planned.batches)]] == [0] * len(planned.batches)
    assert {(p.lr_scaling, p.data, p.precision) for p in points} == {("sqrt", "device", "fp32")}
    # timed as plain training: no step is slowed to measure B_noise (it would slow small
    # batches more), at the MLP's own-input target
    assert planned.conv.noise_every_steps == 0
    assert planned.conv.target == target_settings("adamw").target
    # the check of such a plan says its throughput-fastest batch was not trained
    p = goodput.pick({256: 1e5, 1024: 3e5, 4096: 6e5}, 75.0)
    runs = _runs({256: [1.0, 1.1, 1.2], 1024: [0.5, 0.6, 0.7]})
    got = check_of(p, LEADER.to_dict(), runs)
    assert got is not None and got.outcome == MISSED
    assert "not measured (not both trained)" in got.line()
