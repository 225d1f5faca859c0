"""Cost (issue 32): `--price DEVICE=USD_PER_HOUR` and a suite's `[prices]` table give each row
its dollars per million samples, per epoch and to target; the verdict names the cheapest beside
the fastest where they differ; bad prices are one-line errors naming the value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpubench.cli import main
from gpubench.config import prices
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.config.suite import load_suite
from gpubench.run import cost
from gpubench.run.folder import as_saved, spec_from_saved
from gpubench.science import economy
from gpubench.science.verdict import verdicts
from gpubench.store.row import COLUMNS, make_row

TINY = """
models = ["mlp"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [4, 8]
[budget]
profile_steps = 0
min_steps = 3
max_steps = 3
warmup_steps = 1
warmup_min_s = 0
min_time_s = 0
"""


def test_a_flag_gives_prices_per_device_over_the_suites() -> None:
    suite = prices.from_table({"cpu": 0.2, "cuda": 1, "epoch": "cifar10"})
    got = prices.from_flag("cuda=2.50, cuda:1=3", suite)
    assert got.usd_per_hour == {"cpu": 0.2, "cuda": 2.5, "cuda:1": 3.0}
    assert (got.epoch, got.epoch_samples) == ("cifar10", 50_000)
    assert (got.of("cuda:1"), got.of("cuda:0"), got.of("cpu")) == (3.0, 2.5, 0.2)
    assert prices.with_epoch("1000", got).epoch_samples == 1000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu=2", "--price gpu=2: unknown device 'gpu'; allowed: cpu, cuda or cuda:N"),
        ("cuda=abc", "--price cuda=abc: a price must be a number of US dollars per hour above 0"),
        ("cuda=0", "--price cuda=0: a price must be a number"),
        ("cuda=inf", "--price cuda=inf: a price must be a number"),
        ("cuda", "--price 'cuda': allowed: DEVICE=USD_PER_HOUR"),
    ],
)
def test_a_bad_price_is_refused_naming_it_and_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        prices.from_flag(text)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


@pytest.mark.parametrize("value", ["1.5", "0", "imagenet21k", "-3"])
def test_a_bad_epoch_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="allowed: imagenet, cifar10, mnist or a whole number"):
        prices.with_epoch(value)


def test_a_suites_prices_table_loads_and_survives_suite_json(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(TINY + '\n[prices]\ncpu = 0.10\nepoch = "imagenet"\n')
    spec = load_suite(path)
    assert spec.prices == prices.Prices({"cpu": 0.1}, "imagenet", 1_281_167)
    assert spec_from_saved(as_saved(spec)).prices == spec.prices
    path.write_text(TINY + '\n[prices]\ncpu = "cheap"\n')
    with pytest.raises(ConfigError, match=r"\[prices\] cpu=cheap: a price must be a number"):
        load_suite(path)


def _row(device: str, b: int, samples_per_s: float, **more: Any) -> dict[str, Any]:
    return make_row(
        Point("mlp", "tiny", device, "fp32", "sgd", b),
        "ok",
        samples_per_s=samples_per_s,
        step_time_s=b / samples_per_s,
        **more,
    )


def test_cost_columns_are_the_price_over_the_rate() -> None:
    p = prices.Prices({"cuda": 3.6}, "mnist", 60_000)
    got = cost.columns(_row("cuda", 64, 1000.0), p)
    assert got["usd_per_hour"] == pytest.approx(3.6)
    assert got["usd_per_million_samples"] == pytest.approx(3.6 / 3600 * 1e6 / 1000)  # $1
    assert got["usd_per_epoch"] == pytest.approx(3.6 / 3600 * 60_000 / 1000)  # 6 cents
    assert got["epoch_samples"] == 60_000 and got["usd_to_target"] is None
    assert set(got) <= set(COLUMNS)
    assert cost.columns(_row("cpu", 64, 1000.0), p) == {}  # no price for the CPU: no cost
    converged = cost.columns(_row("cuda", 64, 1000.0, time_to_target_s=90.0), p)
    assert converged["usd_to_target"] == pytest.approx(0.09)
    group = make_row(
        Point("mlp", "tiny", "cuda", "fp32", "sgd", 64, parallel="ddp", nproc=4),
        "ok",
        samples_per_s=1000.0,
        world_size=4,
    )
    assert cost.columns(group, p)["usd_per_hour"] == pytest.approx(4 * 3.6)  # four GPUs


def test_the_cheapest_is_named_beside_the_fastest_where_they_differ() -> None:
    p = prices.Prices({"cpu": 0.10, "cuda": 2.50})
    gpu = _row("cuda", 64, 8000.0)  # 8x faster at 25x the price: not the cheapest
    cpu = _row("cpu", 64, 1000.0)
    for r in (gpu, cpu):
        r.update(cost.columns(r, p))
    line = economy.cost_line(gpu, [gpu, cpu], [])
    assert line == (
        "cpu fp32 B=64, $0.02778 per million samples; "
        "the fastest, cuda fp32 B=64: $0.08681 per million samples"
    )
    (v,) = verdicts(pd.DataFrame([gpu, cpu]))
    assert f"  cheapest: {line}" in v.lines()
    gpu.update(cost.columns(_row("cuda", 64, 30_000.0), p))  # now over 25x faster
    gpu["samples_per_s"] = 30_000.0
    assert economy.cost_line(gpu, [gpu, cpu], []) == (
        "the fastest is the cheapest too: $0.02315 per million samples"
    )


def test_a_sweep_with_prices_writes_cost_columns_and_a_bad_price_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    bad = tmp_path / "bad"
    assert main(["sweep", str(suite), "--price", "cpu=free", "--out", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--price cpu=free" in err and len(err.splitlines()) == 1 and not bad.exists()
    out = tmp_path / "run"
    args = ["--price", "cpu=0.10", "--epoch", "cifar10", "--out", str(out), "--quiet"]
    assert main(["sweep", str(suite), *args, "--no-confirm"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rows and all(r["status"] == "ok" for r in rows)
    for r in rows:
        assert r["usd_per_million_samples"] == pytest.approx(0.10 / 3600 * 1e6 / r["samples_per_s"])
        assert r["usd_per_epoch"] == pytest.approx(0.10 / 3600 * 50_000 / r["samples_per_s"])
    assert "cheapest" in capsys.readouterr().out


def test_the_cheapest_to_target_is_named_beside_the_fastest_to_target() -> None:
    p = prices.Prices({"cpu": 0.10, "cuda": 2.50})
    rows = []
    for device, b, t in (("cuda", 256, 100.0), ("cpu", 32, 1800.0)):
        point = Point("mlp", "tiny", device, "fp32", "sgd", b, 0, "device", lr_scaling="none")
        row = make_row(point, "ok", time_to_target_s=t, samples_per_s=1.0, target=0.9)
        rows.append(row | cost.columns(row, p))
    # the GPU: 100 s at $2.50/h = $0.0694; the CPU: 1800 s at $0.10/h = $0.05
    assert economy.target_lines(rows) == [
        "cheapest to target: cpu fp32 B=32, $0.05 median; "
        "the fastest to target, cuda fp32 B=256: $0.06944"
    ]


def test_at_the_fastests_price_no_row_is_named_cheaper_by_the_rows_alone() -> None:
    """The verdict's fastest (by the confirmation) can read slower in its sweep row than a
    row it beat; at one price per hour that row is not called cheaper (a contradiction seen
    on a loaded machine: "cheapest: cpu fp32 B=32 ... the fastest, cpu bf16 B=256")."""
    p = prices.Prices({"cpu": 0.10, "cuda": 2.50})
    fastest = _row("cpu", 256, 700.0)  # its sweep row, contended
    other = _row("cpu", 32, 1400.0)
    gpu = _row("cuda", 64, 1500.0)  # another price: judged by the rows, and dearer
    for r in (fastest, other, gpu):
        r.update(cost.columns(r, p))
    assert economy.cost_line(fastest, [fastest, other, gpu], []) == (
        "the fastest is the cheapest too: $0.03968 per million samples"
    )
    cheap_gpu = _row("cuda", 64, 100_000.0)  # at another price, the rows decide
    cheap_gpu.update(cost.columns(cheap_gpu, p))
    assert economy.cost_line(fastest, [fastest, other, cheap_gpu], []).startswith(
        "cuda fp32 B=64, $0.006944 per million samples; the fastest, cpu fp32 B=256"
    )
