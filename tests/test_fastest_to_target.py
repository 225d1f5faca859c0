from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpubench.cli import console, main
from gpubench.report import goodput_chart
from gpubench.report.html import e
from gpubench.science.fastest_to_target import (
    answer,
    critical_of,
    measured_of,
    noise_of,
    samples_per_s_by_batch,
)
from gpubench.store.wording import number, percent, span, times


def _conv_row(b_noise: float, pre: float | None, first: int = 2, last: int = 58) -> dict:
    return {
        "noise_scale_b_noise": b_noise,
        "noise_scale_b_noise_low": b_noise / 2,
        "noise_scale_b_noise_high": None,  # unbounded
        "noise_scale_b_noise_preconditioned": pre,
        "noise_scale_b_noise_preconditioned_low": pre and pre / 2,
        "noise_scale_b_noise_preconditioned_high": pre and pre * 2,
        "noise_scale_first_step": first,
        "noise_scale_last_step": last,
    }


def test_the_pick_trades_samples_per_s_against_b_noise() -> None:
    # samples/s grows x1.5 per doubling up to B=512: with B_noise = 72 the time to target
    # (B + 72)/X is least at B=128, and B=512 takes (584/X512)/(200/X128) = x1.30 longer
    rate = {32: 1000.0, 64: 1500.0, 128: 2250.0, 256: 3375.0, 512: 5062.5}
    noise = noise_of([_conv_row(30.0, 72.0)])
    assert noise is not None and noise.kind == "preconditioned"
    assert (noise.low, noise.high, noise.where) == (36.0, 144.0, "steps 2-58 of 1 convergence run")
    got = answer(rate, noise, "cnn")
    assert got.pick is not None and (got.pick.batch, got.pick.throughput_batch) == (128, 512)
    assert got.pick.gain == pytest.approx((584 / 5062.5) / (200 / 2250))
    assert got.line().startswith("predicted from B_noise ≈ 72 (36.0-144, preconditioned;")
    assert f"B=128; the throughput-fastest B=512 about {times(got.pick.gain)} slower" in got.line()
    # raw only (SGD): its unbounded interval; two runs: across them
    raw = noise_of([_conv_row(30.0, None)])
    assert raw is not None and (raw.kind, raw.high) == ("raw", math.inf)
    both = noise_of([_conv_row(30.0, None), _conv_row(60.0, None, 4, 40)])
    assert both is not None and both.b_noise == pytest.approx(math.sqrt(30 * 60))
    assert both.where == "steps 2-58 of 2 convergence runs, across them"


def test_no_b_noise_is_not_predicted_and_says_what_gives_it() -> None:
    got = answer({32: 1.0, 64: 2.0}, noise_of([{"noise_scale_b_noise": None}]), "mlp")
    assert got.pick is None and got.to_dict()["batch"] is None
    assert got.line().startswith("not predicted (synthetic data")
    assert "sweep suites/convergence.toml --models mlp" in got.line()
    assert samples_per_s_by_batch(
        [{"batch_size": 8, "samples_per_s": 3.0}, {"batch_size": 8, "samples_per_s": 5.0}]
    ) == {8: 4.0}


SUITE = """
name = "conv"
mode = "convergence"
models = ["mlp"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [16, 64]
optimizers = ["adamw"]
seeds = [0]

[convergence]
target = 0.3
max_steps = 30
eval_every_steps = 10
noise_every_steps = 2
"""


def test_terminal_html_and_explain_json_quote_the_same_prediction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "conv.toml"
    suite.write_text(SUITE)
    out = tmp_path / "run"
    assert main(["sweep", str(suite), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["explain", str(out), "--json"]) == 0
    (v,) = json.loads(capsys.readouterr().out)["verdicts"]
    got = v["fastest_to_target"]
    assert got["predicted"] == "predicted" and got["kind"] == "preconditioned"
    assert got["batch"] in (16, 64) and got["gain"] >= 1 and got["b_noise"] > 0
    assert got["where"] == "steps 2-28 of 2 convergence runs, across them"
    # the text quotes the JSON's own figures, in the store's wording
    low, high = got["interval"]
    assert f"B_noise ≈ {number(got['b_noise'])} ({span(low, high)}, preconditioned;" in got["text"]
    assert f"B={got['batch']}" in got["text"]
    if got["batch"] != got["throughput_batch"]:
        assert f"about {times(got['gain'])} slower" in got["text"]
    # the relative times the report's chart draws: the pick's is 1, none under it
    rel = {int(b): t for b, t in got["relative_times"].items()}
    assert rel[got["batch"]] == 1 and min(rel.values()) == 1 and set(rel) == {16, 64}
    # both batches reach accuracy 0.3 within 30 steps: the answer table's cell is measured
    measured = got["measured"]
    assert measured is not None and set(measured["times_s"]) <= {"16", "64"}
    cell = got["cell"]
    assert cell.startswith(f"B={measured['batch']} measured (")
    if measured["batch"] != measured["throughput_batch"]:
        assert f"{times(measured['gain'])} over B={measured['throughput_batch']}" in cell
    monkeypatch.setattr(console.stdout, "width", 400)  # the answer table unwrapped
    assert main(["explain", str(out)]) == 0
    printed = capsys.readouterr().out
    assert cell in printed  # the answer table's cell
    terminal = " ".join(printed.split())
    assert f"fastest to target: {got['text']}" in terminal
    # the report the sweep wrote: the same cell in its answer table, and the predicted chart
    page = (out / "report.html").read_text()
    answer_table = page[page.index("<table") : page.index("</table>")]
    assert f"<td>{e(cell)}</td>" in answer_table
    assert f"plots/{goodput_chart.FILE}" in page
    assert (out / "plots" / goodput_chart.FILE).stat().st_size > 0
    record = json.loads((out / "plots" / "gpubench-charts.json").read_text())
    assert goodput_chart.FILE in record["charts"]


def test_the_cell_says_predicted_or_why_not() -> None:
    rate = {32: 1000.0, 64: 1500.0, 128: 2250.0, 256: 3375.0, 512: 5062.5}
    got = answer(rate, noise_of([_conv_row(30.0, 72.0)]), "cnn")
    assert got.cell() == f"B=128 predicted ({times(got.pick.gain)} over B=512)"  # type: ignore[union-attr]
    assert got.to_dict()["cell"] == got.cell()
    # B_noise far over every batch: the throughput-fastest is the pick too
    top = answer(rate, noise_of([_conv_row(3e6, None)]), "cnn")
    assert top.cell() == "B=512 predicted (the throughput-fastest)"
    none = answer(rate, None, "mlp")
    assert none.cell() == "not predicted (synthetic data)"
    assert none.to_dict()["cell"] == none.cell() and none.relative_times() == {}


def _conv(b: int, seed: int, **values: object) -> dict:
    """A cnn convergence row (it carries its lr rule) at batch `b`, `seed`, with `values`."""
    return {
        "model": "cnn",
        "batch_size": b,
        "seed": seed,
        "lr_scaling": "sqrt",
        "status": "ok",
        **values,
    }


def test_the_measured_pick_is_the_least_median_time_whose_every_seed_reached() -> None:
    def run(b: int, seed: int, t: float | None) -> dict:
        return _conv(b, seed, time_to_target_s=t)

    rate = {32: 1000.0, 128: 2250.0, 512: 5062.5}
    rows = [
        run(32, 0, 0.4),
        run(32, 1, 0.6),
        run(128, 0, 0.3),
        run(128, 1, 0.2),
        run(512, 0, 0.5),
        run(512, 1, 0.7),
    ]
    got = measured_of(rows, rate)
    assert got is not None and (got.batch, got.throughput_batch) == (128, 512)
    assert got.gain == pytest.approx(0.6 / 0.25) and got.times_s[32] == pytest.approx(0.5)
    cell = answer(rate, None, "cnn", got).cell()
    assert cell == f"B=128 measured ({times(0.6 / 0.25)} over B=512)"
    # a seed of the throughput-fastest batch missed the target: no gain, said so
    rows[-1] = run(512, 1, None)
    missed = measured_of(rows, rate)
    assert missed is not None and missed.gain is None and 512 not in missed.times_s
    assert answer(rate, None, "cnn", missed).cell() == (
        "B=128 measured (B=512 did not reach the target in every seed)"
    )
    assert measured_of([run(32, 0, None)], rate) is None


def test_b_crit_is_fitted_to_the_steps_to_target_and_stated_beside_b_noise() -> None:
    # S = 40 (1 + 60/B) steps, 2 seeds a batch (one 5% over): B_crit ~ 60
    def run(b: int, seed: int, steps: float | None) -> dict:
        return _conv(b, seed, steps_to_target=steps, time_to_target_s=steps and steps * 1e-3)

    rows = [run(b, s, 40 * (1 + 60 / b) * (1.05 if s else 1)) for b in (8, 32, 128) for s in (0, 1)]
    fit, why = critical_of(rows)
    assert why is None and fit is not None and fit.b_crit == pytest.approx(60, rel=0.05)
    rate = {8: 1000.0, 32: 3000.0, 128: 6000.0}
    got = answer(rate, noise_of([_conv_row(30.0, 72.0)]), "cnn", None, (fit, why))
    assert got.line().endswith(
        f"; B_crit ≈ {number(fit.b_crit)} fitted to steps to target at 3 batches "
        f"(S = S_min (1 + B_crit/B), relative rms residual {percent(fit.rel_rmse)})"
    )
    assert got.to_dict()["b_crit"]["b_crit"] == fit.b_crit
    # a batch whose seed missed the target is left out of the fit: 2 batches are too few
    rows[-1] = run(128, 1, None)
    assert critical_of(rows) == (
        None,
        "no B_crit fit: steps to target at 2 batches whose every seed reached it, 3 needed",
    )
    assert critical_of([run(8, 0, None)]) == (None, None)  # nothing reached: nothing said


def test_a_pick_that_moves_over_b_noises_interval_claims_no_gain() -> None:
    # samples/s x1.9 per doubling from B=4 to B=4096: B_noise ≈ 23.5 picks a small batch, its
    # unbounded interval's high end the throughput-fastest B=4096: uncertain, no gain claimed
    rate = {
        b: 100.0 * 1.9**i for i, b in enumerate([4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096])
    }
    row = {**_conv_row(23.5, None), "noise_scale_b_noise_low": 14.6}
    got = answer(rate, noise_of([row]), "mlp")
    assert got.pick is not None and got.uncertain() and got.pick.high_batch == 4096
    moves = f"B={got.pick.low_batch} to B=4096 over B_noise's interval (unbounded above)"
    assert got.cell() == f"B={got.pick.batch} predicted, uncertain ({moves})"
    assert f"B={got.pick.batch}, uncertain: {moves}, so no gain" in got.line()
    assert "slower to target" not in got.line() and times(got.pick.gain) not in got.line()
    d = got.to_dict()
    assert (d["uncertain"], d["moves_over"], d["cell"]) == (
        True,
        [got.pick.low_batch, 4096],
        got.cell(),
    )
    # the same B_noise with a bounded interval whose ends pick within one batch: claimed
    tight = {**row, "noise_scale_b_noise_low": 23.0, "noise_scale_b_noise_high": 24.0}
    sure = answer(rate, noise_of([tight]), "mlp")
    assert not sure.uncertain() and sure.to_dict()["moves_over"] is None
    assert "slower to target" in sure.line() and "uncertain" not in sure.cell()
