"""Issue 42: the default sweep leaves out a precision its device only emulates (bf16 on a CPU
without bf16 instructions, 10-20x slower than fp32 on this project's 2-core AVX2 host), says so
in growth.json and in the verdict, and measures it where the user names the precisions."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpubench.cli.parser import build_parser
from gpubench.cli.sweep_args import spec_from_args
from gpubench.config import precision
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.config.suite import load_suite
from gpubench.run import sweep
from gpubench.run.context import RunContext, RunOptions
from gpubench.science import levers, plan
from gpubench.science.verdict import verdicts
from gpubench.store import growth_record
from gpubench.store.results import ResultStore, read_rows
from gpubench.store.row import make_row

SPEC = SweepSpec(
    name="e",
    models=("mlp",),
    size="tiny",
    devices=("cpu",),
    batch_sizes=(4, 16),
    precisions=("fp32", "bf16"),
    budget=Budget.fixed(3),
    skip_emulated=True,
)


def _row(point: Point, *_: object) -> dict[str, Any]:
    rate = 100.0 * point.batch_size * (0.1 if point.precision == "bf16" else 1.0)
    return make_row(point, "ok", samples_per_s=rate, step_time_s=point.batch_size / rate)


def _sweep(monkeypatch: pytest.MonkeyPatch, run_dir: Path, spec: SweepSpec) -> list[int]:
    """The sweep's loop over `spec` with rows made by _row (no worker); the totals it reported."""
    monkeypatch.setattr(sweep, "_row", _row)
    totals: list[int] = []
    with RunContext(run_dir, RunOptions()) as run:
        run.store = ResultStore(run_dir)
        sweep._measure(run, spec, spec.points(), [], lambda _r, _i, n: totals.append(n), None, None)
    return totals


def test_an_emulated_precision_is_left_out_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    totals = _sweep(monkeypatch, tmp_path, SPEC)
    rows = read_rows(tmp_path)
    assert {(r["precision"], r["batch_size"]) for r in rows} == {("fp32", 4), ("fp32", 16)}
    assert totals == [2, 2], "the progress counts only the points it measures"
    record = growth_record.read(tmp_path)
    assert record is not None
    assert [(u.point["precision"], u.point["batch_size"]) for u in record.unmeasured] == [
        ("bf16", 4),
        ("bf16", 16),
    ]
    assert {u.reason for u in record.unmeasured} == {"emulated"}
    assert record.unmeasured[0].detail == (
        "this CPU has no bf16 instructions (AVX-512 BF16 or AMX), so PyTorch emulates bf16; "
        "--precisions fp32,bf16 measures it"
    )
    # the verdict: planned and left out, not a lever, never a next step nor "slower"
    missing = plan.unreached([], rows, record.unmeasured)
    (v,) = verdicts(pd.DataFrame(rows), unreached=missing)
    said = "\n".join(v.lines())
    assert "planned, not measured: cpu bf16 B=4, 16 (left out: this CPU has no bf16" in said
    best = max(rows, key=lambda r: r["samples_per_s"])
    lines, todo = levers.levers("compute", best, rows, rows, [], unreached=missing)
    assert not any("precision" in line for line in lines)
    assert "bf16" not in (todo or "")
    (no,) = levers.no_help("compute", best, rows, [], unreached=missing)
    assert no.startswith("a lower precision (bf16): not measured (left out: this CPU has no bf16")


def test_a_cpu_with_bf16_instructions_measures_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    _sweep(monkeypatch, tmp_path, SPEC)
    assert len(read_rows(tmp_path)) == 4
    record = growth_record.read(tmp_path)
    assert record is None or not record.unmeasured


def test_without_skip_emulated_every_precision_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    _sweep(monkeypatch, tmp_path, dataclasses.replace(SPEC, skip_emulated=False))
    assert len(read_rows(tmp_path)) == 4


def test_the_default_suite_skips_emulated_precisions_unless_they_are_named() -> None:
    def spec(*argv: str) -> SweepSpec:
        return spec_from_args(build_parser().parse_args(["sweep", *argv]))

    assert load_suite("quick").skip_emulated
    assert spec().skip_emulated
    assert not spec("--precisions", "fp32,bf16").skip_emulated
    assert spec("--models", "mlp").skip_emulated


def test_skip_emulated_is_a_boolean_suite_key(tmp_path: Path) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text('models = ["mlp"]\nskip_emulated = "yes"\n')
    with pytest.raises(ConfigError, match=r"skip_emulated"):
        load_suite(suite)
    suite.write_text('models = ["mlp"]\nskip_emulated = true\n')
    assert load_suite(suite).skip_emulated


def test_only_bf16_on_a_cpu_without_it_is_emulated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    assert precision.emulated_reason("bf16", "cpu") is not None
    assert precision.emulated_reason("fp32", "cpu") is None
    assert precision.emulated_reason("bf16", "cuda") is None  # unsupported there instead
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    assert precision.emulated_reason("bf16", "cpu") is None


def test_env_json_says_whether_the_cpu_has_bf16_instructions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpubench.store import env

    for has in (False, True):
        monkeypatch.setattr(precision, "cpu_has_bf16", lambda has=has: has)
        assert env.cpu_info()["bf16_instructions"] is has
    assert env.cpu_info()["capability"]  # "AVX2", "AVX512", ... as torch dispatches
