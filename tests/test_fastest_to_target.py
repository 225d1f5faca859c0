from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpubench.cli import main
from gpubench.science.fastest_to_target import answer, noise_of, samples_per_s_by_batch
from gpubench.store.wording import number, span, times


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
target = 0.8
max_steps = 30
eval_every_steps = 30
noise_every_steps = 2
"""


def test_terminal_and_explain_json_quote_the_same_prediction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
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
    assert main(["explain", str(out)]) == 0
    terminal = " ".join(capsys.readouterr().out.split())
    assert f"fastest to target: {got['text']}" in terminal
