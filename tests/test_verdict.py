"""Issue 15's science and faces: the bottleneck rules, the verdict, `explain`, the end of a
sweep, the profiling switch; and issue 13's item that every grouping uses a point's whole
identity (speed options included)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from report_fixture import H100, cpu_gpu_runs, env, speed_row, write_run

from gpubench.cli.main import main
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.config.suite import load_suite
from gpubench.report import analysis as A
from gpubench.report.runs import combine, load_runs
from gpubench.science import bottleneck as B
from gpubench.science.verdict import verdicts
from gpubench.store import confirmations
from gpubench.store.wording import times

ROOF = {"tflops": 10.0, "peak_tflops": 100.0, "peak_bandwidth_gb_per_s": 1000.0}  # ridge 100


def _row(**values: Any) -> dict[str, Any]:
    shares = values.pop("shares", {"matmul": 0.8, "elementwise": 0.2})
    return {
        "status": "ok",
        "data": "device",
        "busy_fraction": 0.9,
        **ROOF,
        "intensity_flop_per_byte": 500.0,
        "profile": {"category_s": shares},
        **values,
    }


@pytest.mark.parametrize(
    ("row", "kind"),
    [
        (_row(busy_fraction=0.3), "launch"),
        (_row(data="host", shares={"copy": 0.5, "matmul": 0.5}), "input"),
        (_row(data="host", shares={"copy": 0.1, "matmul": 0.9}, tflops=60.0), "compute"),
        (_row(tflops=60.0), "compute"),
        # issue 41: memory at a third of the bandwidth roof or more (50%; 10% of the matmul's)
        (_row(intensity_flop_per_byte=20.0, achieved_gb_per_s=500.0), "memory"),
        # under a third of both roofs, over 5% of one: no one roof binds, whatever the profile
        (
            _row(shares={"norm": 0.4, "elementwise": 0.3, "matmul": 0.3}, achieved_gb_per_s=100.0),
            "mixed",
        ),
        (_row(achieved_gb_per_s=20.0), "mixed"),  # products dominate, 10% and 2% of the roofs
    ],
)
def test_bottleneck_rules(row: dict[str, Any], kind: str) -> None:
    b = B.classify(row)
    assert b is not None and b.kind == kind and b.evidence


def test_no_bottleneck_without_the_evidence() -> None:
    assert B.classify(_row(status="oom")) is None
    assert B.classify(_row(tflops=None)) is None
    # No profile and above the ridge: what holds the step is not known.
    assert B.classify({**_row(), "profile": None, "busy_fraction": None}) is None
    assert B.classify({**_row(tflops=60.0), "profile": None}).kind == "compute"  # type: ignore[union-attr]
    assert B.ridge(ROOF) == pytest.approx(100.0)


def test_verdict_names_the_fastest_its_speedup_bottleneck_levers_and_next_step(
    tmp_path: Path,
) -> None:
    frame = combine(load_runs(cpu_gpu_runs(tmp_path)))
    (v,) = verdicts(frame)
    ok = frame[frame["status"] == "ok"]
    best = ok.loc[ok["samples_per_s"].idxmax()]
    assert v.fastest == f"cuda {best['precision']} B={int(best['batch_size'])}"
    cpu_best = ok[ok["device"] == "cpu"]["samples_per_s"].max()
    assert f"{times(best['samples_per_s'] / cpu_best)} the CPU's fastest" in (v.cpu_speedup or "")
    # the fixture: 3.7% of the matmul roof, 9.2% of the bandwidth roof (issue 41: no one roof)
    assert v.bottleneck == "mixed"
    assert any("step time" in e and "from B=16" in e for e in v.evidence)
    bf16 = next(lever for lever in v.levers if lever.startswith("a lower precision (bf16)"))
    assert "in use" in bf16 and "without it (best of each" in bf16  # fp32 B=4096 ran out
    # the answer is the GPU's: its larger batches, not the CPU's, are worth measuring
    assert v.next_experiment == "measure larger batches on cuda: --devices cuda --batch-sizes auto"
    # issue 49: the CPU rows' missing energy is the run's to say once, not each model's
    assert v.energy and not any("CPU" in e or e.startswith("the fastest on cpu") for e in v.energy)
    assert v.lines()[0].startswith("mlp/small, adamw: fastest cuda")


def test_a_measured_lever_reports_its_effect(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    base = Point("mlp", "small", "cuda", "bf16", "adamw", 64)
    rows = [
        speed_row(base, 2e-3, 1e-7, rng, busy_fraction=0.1),
        speed_row(dataclasses.replace(base, cuda_graph=True), 5e-4, 1e-7, rng, busy_fraction=0.4),
    ]
    rows = [B.classified(r) for r in rows]
    frame = combine(load_runs([write_run(tmp_path / "g", rows, env([H100]))]))
    (v,) = verdicts(frame)
    assert v.fastest.endswith("(CUDA graph)")
    graph = next(lever for lever in v.levers if lever.startswith("a CUDA graph"))
    ratio = float(graph.split(", ")[1].removeprefix("x").split(" ")[0].replace(",", ""))
    assert ratio == pytest.approx(rows[1]["samples_per_s"] / rows[0]["samples_per_s"], rel=0.01)


def test_explain_prints_the_verdict_and_refuses_a_missing_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cpu, gpu = cpu_gpu_runs(tmp_path)
    assert main(["explain", str(cpu), str(gpu)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("verdict (cpu, gpu):") and "mlp/small, adamw: fastest cuda" in out
    assert "bottleneck: mixed" in out and "next: " in out
    assert main(["explain", str(tmp_path / "nothing")]) == 2


def test_every_grouping_keeps_eager_and_compiled_points_apart(tmp_path: Path) -> None:
    """Issue 13: series, summary and speedups group by a point's whole identity."""
    rng = np.random.default_rng(0)
    gpu, cpu = [], []
    for b in (16, 64, 256):
        p = Point("mlp", "small", "cuda", "bf16", "adamw", b)
        gpu.append(speed_row(p, 1e-3, 1e-6, rng))
        gpu.append(speed_row(dataclasses.replace(p, compile="compile"), 2e-4, 1e-6, rng))
        cpu.append(speed_row(dataclasses.replace(p, device="cpu"), 2e-3, 1e-4, rng))
    runs = load_runs(
        [write_run(tmp_path / "gpu", gpu, env([H100])), write_run(tmp_path / "cpu", cpu, env())]
    )
    frame = combine(runs)
    summary = A.series_summary(frame, {}).set_index("series")
    gpu_series = [s for s in summary.index if s.startswith(f"cuda ({H100['name']})")]
    eager = next(s for s in gpu_series if "| eager |" in s)
    compiled = next(s for s in gpu_series if "| compiled |" in s)
    assert summary.loc[eager]["points_ok"] == 3 and summary.loc[compiled]["points_ok"] == 3
    speedups = A.speedup_table(frame, {})
    assert len(speedups) == 3 and set(speedups["compile"]) == {"eager"}  # compiled: no CPU twin
    eager_rows = [r for r in gpu if r["compile"] == "eager"]
    for r in speedups.to_dict("records"):
        g = next(x for x in eager_rows if x["batch_size"] == r["batch_size"])
        assert r["gpu_step_time_s"] == pytest.approx(g["step_time_s"])


def test_profile_switch_in_a_suite_and_on_the_command_line(tmp_path: Path) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text('models = ["mlp"]\nprofile = false\n')
    assert load_suite(suite).profile is False
    suite.write_text('models = ["mlp"]\nprofile = 0\n')
    with pytest.raises(ConfigError, match="profile"):
        load_suite(suite)
    suite.write_text('models = ["mlp"]\n[budget]\nprofile_steps = 1.5\n')
    with pytest.raises(ConfigError, match="profile_steps"):
        load_suite(suite)


TINY = """
models = ["mlp"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [4, 8]
precisions = ["fp32"]
optimizers = ["sgd"]
[budget]
warmup_steps = 1
warmup_min_s = 0
min_steps = 30
max_steps = 30
min_time_s = 0
"""


def test_a_sweep_ends_with_the_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # profiled, not confirmed (confirmed, not profiled: tests/test_verdict_answer.py)
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    out = tmp_path / "run"
    assert main(["sweep", str(suite), "--out", str(out), "--quiet", "--no-confirm"]) == 0
    printed = capsys.readouterr().out
    table, verdict = printed.index("gpubench results"), printed.index("verdict (run):")
    assert table < verdict and "mlp/tiny, sgd: " in printed[verdict:]
    assert "how sure: " in printed[verdict:]
    assert "not re-measured (no confirmation in this run)" in printed[verdict:]
    assert not (out / confirmations.FILE).exists()
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r.get("profile") is not None for r in rows)
    assert all(r["bottleneck"] in B.BOTTLENECKS for r in rows)
    env_obj = json.loads((out / "env.json").read_text())
    assert env_obj["memory_bandwidth"]["cpu"]["gb_per_s"] > 0
    assert "rapl" in env_obj
    assert not pd.read_csv(out / "results.csv").empty


def test_a_run_begun_before_profiling_existed_can_be_resumed(tmp_path: Path) -> None:
    from gpubench.run import folder

    spec = load_suite(Path(__file__).parent.parent / "suites" / "quick.toml")
    saved = spec.to_dict()
    del saved["profile"]
    del saved["budget"]["profile_steps"]
    (tmp_path / "suite.json").write_text(json.dumps(saved))
    folder.check_resumable(tmp_path, spec, extend=False)  # no "other settings" error
    with pytest.raises(ConfigError, match="other settings"):
        folder.check_resumable(tmp_path, dataclasses.replace(spec, profile=False), extend=False)


def test_a_point_whose_profile_was_skipped_says_how_to_get_one(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = [
        speed_row(Point("cnn", "small", "cpu", "fp32", "sgd", b), 1e-3, 0.25, rng)
        | {"profile": {"skipped": "skipped: 1 step(s) of 1 s would add more than 10%"}}
        | {"busy_fraction": None, "intensity_flop_per_byte": 500.0, "achieved_gb_per_s": None}
        for b in (4, 16)
    ]
    frame = combine(load_runs([write_run(tmp_path / "c", rows, env())]))
    (v,) = verdicts(frame)
    assert v.bottleneck is None and "--max-time" in (v.next_experiment or "")
    assert any("from B=4 to B=16" in e for e in v.evidence)
