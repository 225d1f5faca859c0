from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from report_fixture import env, speed_row, write_run

import gpubench
from gpubench.cli import main
from gpubench.config.spec import Point, SweepSpec
from gpubench.report.compare import compare, format_comparison, load_input, summary
from gpubench.store.results import read_rows
from gpubench.store.row import make_row

POINTS = [Point(m, "tiny", "cpu", "fp32", "sgd", b) for m in ("mlp", "cnn") for b in (4, 16, 64)]


def _run(path: Path, seed: int, slowdown: dict[int, float] | None = None, n: int = 40) -> Path:
    """Rows drawn from the same cost model; `slowdown` multiplies the times of some points."""
    rng = np.random.default_rng(seed)
    rows = [
        speed_row(p, 1e-3, 1e-5, rng, n=n, slowdown=(slowdown or {}).get(i, 1.0))
        for i, p in enumerate(POINTS)
    ]
    return write_run(path, rows, env())


def test_two_runs_of_the_same_code_pass(tmp_path: Path) -> None:
    c = compare(_run(tmp_path / "a", 1), _run(tmp_path / "b", 2))
    assert len(c.points) == len(POINTS) and not c.only_in_base and not c.only_in_new
    assert c.regressions == [] and c.exit_code() == 0
    assert all(abs(p.step_time_change_pct or 0) < 5 for p in c.points)


def test_an_injected_20_percent_slowdown_is_a_regression(tmp_path: Path) -> None:
    base = _run(tmp_path / "a", 1)
    new = _run(tmp_path / "b", 2, slowdown={1: 1.2})
    c = compare(base, new)
    assert [p.point["batch_size"] for p in c.regressions] == [16]
    slow = c.regressions[0]
    assert slow.step_time_change_pct == pytest.approx(20, abs=3)
    assert slow.throughput_change_pct == pytest.approx(100 / 1.2 - 100, abs=3)
    assert slow.p_value is not None and slow.p_value < 1e-6
    assert c.exit_code() == 1
    # Above the threshold it is not flagged; a speed-up is an improvement, not a regression.
    assert compare(base, new, threshold_pct=30).exit_code() == 0
    faster = compare(new, base)
    assert faster.exit_code() == 0
    assert [p.verdict for p in faster.points if p.verdict != "unchanged"] == ["improvement"]
    assert faster.points[1].verdict == "improvement"


def test_noise_is_not_called_a_regression(tmp_path: Path) -> None:
    # Three steps a side: a 20% change in the median cannot be told from noise.
    c = compare(_run(tmp_path / "a", 1, n=3), _run(tmp_path / "b", 2, {0: 1.2}, n=3))
    assert c.exit_code() == 0
    assert c.points[0].verdict == "too few samples" and c.points[0].p_value is None
    # Wide overlapping distributions whose medians differ by 10%: not significant.
    p = Point("mlp", "tiny", "cpu", "fp32", "sgd", 4)
    runs = []
    for name, scale in (("wa", 1.0), ("wb", 1.1)):
        times = [t * 1e-3 * scale for t in range(1, 9)]
        row = make_row(p, "ok", step_time_s=float(np.median(times)), step_times_s=times)
        runs.append(write_run(tmp_path / name, [row], env()))
    point = compare(*runs).points[0]
    assert point.step_time_change_pct == pytest.approx(10)
    assert point.verdict == "not significant" and (point.p_value or 0) > 0.3


def test_a_point_that_stops_running_is_a_regression(tmp_path: Path) -> None:
    base = _run(tmp_path / "a", 1)
    rng = np.random.default_rng(2)
    rows = [speed_row(p, 1e-3, 1e-5, rng) for p in POINTS[:-1]]
    rows.append(make_row(POINTS[-1], "oom", error="out of memory"))
    rows.append(speed_row(Point("transformer", "tiny", "cpu", "fp32", "sgd", 4), 1e-3, 0, rng))
    c = compare(base, write_run(tmp_path / "b", rows, env()))
    assert [(p.point["model"], p.verdict) for p in c.regressions] == [("cnn", "broken")]
    assert [r["model"] for r in c.only_in_new] == ["transformer"]
    assert c.exit_code() == 1


def test_output_formats_and_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _run(tmp_path / "a", 1)
    new = _run(tmp_path / "b", 2, slowdown={4: 1.2})
    c = compare(base, new)
    text = format_comparison(c, "text")
    assert "cnn/tiny cpu fp32 sgd B=16" in text and "regression" in text
    md = format_comparison(c, "markdown").splitlines()
    assert md[0].startswith("### gpubench") and "1 regression " in md[2]
    assert sum(line.startswith("| cnn/tiny") for line in md) == 3
    obj = json.loads(format_comparison(c, "json"))
    assert obj["regressions"] == 1 and len(obj["points"]) == len(POINTS)
    assert main(["compare", str(base), str(new), "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["regressions"] == 1
    assert main(["compare", str(base), str(base / "results.jsonl")]) == 0
    assert main(["compare", str(base), str(new), "--threshold", "-3"]) == 2
    assert main(["compare", str(base), str(tmp_path / "none")]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_real_measurements_split_in_two_pass_and_slowed_by_20_percent_fail(
    tmp_path: Path,
) -> None:
    """One real sweep's raw step times, dealt alternately into two runs of the same code; then
    the second run's times are made 20% slower."""
    spec = SweepSpec(
        "split",
        models=("transformer",),
        size="tiny",
        devices=("cpu",),
        batch_sizes=(8,),
        budget=gpubench.Budget.fixed(60, warmup_steps=3),
    )
    gpubench.run_sweep(spec, tmp_path / "real")
    (row,) = read_rows(tmp_path / "real")
    times = row["step_times_s"]

    def half(name: str, part: list[float]) -> Path:
        r = {**row, "step_times_s": part, "step_time_s": float(np.median(part))}
        r["samples_per_s"] = r["batch_size"] / r["step_time_s"]
        return write_run(tmp_path / name, [r], env())

    base = half("base", times[0::2])
    assert compare(base, half("same", times[1::2])).exit_code() == 0
    q1, q3 = np.percentile(times, [25, 75])
    if (q3 - q1) / np.median(times) > 0.1:
        pytest.skip(f"this machine is too busy to time steadily: IQR {q3 - q1:.2e} s")
    slowed = compare(base, half("slow", [t * 1.2 for t in times[1::2]]))
    assert slowed.exit_code() == 1, format_comparison(slowed, "text")


def test_load_input_keeps_the_latest_row_of_a_point_measured_twice(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    p = POINTS[0]
    run = write_run(tmp_path / "a", [speed_row(p, 1e-3, 0, rng), speed_row(p, 2e-3, 0, rng)], env())
    frame, replaced = load_input(run)
    assert len(frame) == 1 and frame["step_time_s"].iloc[0] > 1.5e-3 and replaced == 1


def _bench_file(path: Path, times: dict[str, list[float]]) -> Path:
    """A pytest-benchmark JSON file of gpubench fixture benchmarks that differ only in a
    parameter of their own (not a gpubench identity column), with synthetic times."""
    info = {"model": "mlp", "model_size": "tiny", "device": "cpu", "precision": "fp32"}
    info |= {"optimizer": "sgd", "batch_size": 8, "seed": 0, "data": "device"}
    benches = [
        {
            "name": f"test_step[{param}]",
            "fullname": f"tests/test_x.py::test_step[{param}]",
            "params": {"width": param},
            "extra_info": info,
            "stats": {"median": sorted(t)[len(t) // 2], "data": t, "rounds": len(t)},
        }
        for param, t in times.items()
    ]
    path.write_text(json.dumps({"benchmarks": benches}))
    return path


def test_benchmarks_alike_but_for_a_parameter_are_never_merged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steady = [1e-3 * (1 + 0.002 * i) for i in range(9)]
    base = _bench_file(tmp_path / "base.json", {"64": steady, "128": steady})
    # only the second one slows down; a third appears
    slowed = {"64": steady, "128": [t * 1.3 for t in steady], "256": steady}
    new = _bench_file(tmp_path / "new.json", slowed)
    c = compare(base, new)
    assert len(c.points) == 2 and c.exit_code() == 1
    (regression,) = c.regressions
    assert regression.point["benchmark"] == "tests/test_x.py::test_step[128]"
    assert [p["benchmark"] for p in c.only_in_new] == ["tests/test_x.py::test_step[256]"]
    assert main(["compare", str(base), str(new)]) == 1
    out = capsys.readouterr().out
    assert (
        "only in new:  mlp/tiny cpu fp32 sgd B=8 benchmark=tests/test_x.py::test_step[256]" in out
    )
    assert "test_step[128]" in out


def test_a_point_measured_twice_is_counted_when_set_aside(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    p = POINTS[0]
    twice = [speed_row(p, 1e-3, 0, rng), speed_row(p, 1e-3, 0, rng)]
    run = write_run(tmp_path / "a", twice, env())
    c = compare(run, run)
    assert len(c.points) == 1 and c.replaced_in_base == c.replaced_in_new == 1
    assert "1 earlier row of points measured twice in base" in format_comparison(c, "text")


def test_the_readmes_example_matches_every_point_of_an_older_schema() -> None:
    """The 2026-11-22 rows lack the columns added since (or hold null where newer rows hold the
    default): each is the point measured at the setting's default, so all 36 match."""
    root = Path(__file__).resolve().parents[1] / "results"
    c = compare(root / "20261122-cpu-quick", root / "20261123-cpu-quick-confirmed")
    assert len(c.points) == 36 and not c.only_in_base and not c.only_in_new


def test_two_runs_without_a_common_point_fail_the_gate(tmp_path: Path) -> None:
    for name, model in (("a", "mlp"), ("b", "cnn")):
        run = tmp_path / name
        run.mkdir()
        row = make_row(Point(model, "tiny", "cpu", "fp32", "sgd", 4), "ok", step_time_s=0.01)
        (run / "results.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    c = compare(tmp_path / "a", tmp_path / "b")
    assert c.exit_code() == 1
    assert summary(c).startswith("FAILED: no point is in both runs")


FIVE_SWEEPS = Path(__file__).resolve().parents[1] / "results" / "20261128-cpu-five-sweeps-b"


@pytest.mark.parametrize("pair", [(1, 2), (1, 5), (3, 4)])
def test_two_stored_sweeps_of_one_commit_that_drifted_pass(
    pair: tuple[int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    """Two default sweeps of one commit minutes apart on the quiet 2-core CPU: their step
    times moved 17-104%, each within the machines' drift that compare reads from the runs."""
    base, new = (FIVE_SWEEPS / f"run-{i}" for i in pair)
    c = compare(base, new)
    assert c.drift is not None and c.drift.probe is not None and c.drift.matched >= 8
    assert c.exit_code() == 0 and c.regressions == []
    moved = [p for p in c.points if abs(p.step_time_change_pct or 0) > 15]
    assert moved and all(p.verdict == "within drift" for p in moved)
    assert main(["compare", str(base), str(new)]) == 0
    out = capsys.readouterr().out
    assert f"within the machines' drift of {c.drift.pct:.0f}%: cannot tell" in out


def _slowed_copy(src: Path, dst: Path, factor: float) -> Path:
    """A copy of run folder `src` whose code runs `factor` times slower: its rows' step times
    and its re-measured figures scaled alike (env.json, the machine, as it was)."""
    dst.mkdir()
    for name in ("env.json", "suite.json"):
        shutil.copy(src / name, dst / name)
    rows = [json.loads(line) for line in (src / "results.jsonl").read_text().splitlines()]
    for r in rows:
        if r.get("status") == "ok":
            r["step_times_s"] = [t * factor for t in r["step_times_s"]]
            r["step_time_s"] *= factor
            r["samples_per_s"] /= factor
    (dst / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    confirm = json.loads((src / "confirm.json").read_text())
    for part in confirm["partitions"]:
        part["samples_per_s"] = [
            [x / factor for x in figures] for figures in part.get("samples_per_s") or []
        ]
    (dst / "confirm.json").write_text(json.dumps(confirm))
    return dst


def test_a_regression_far_beyond_the_drift_still_fails(tmp_path: Path) -> None:
    base = FIVE_SWEEPS / "run-1"
    new = _slowed_copy(FIVE_SWEEPS / "run-2", tmp_path / "slow", 3.0)
    c = compare(base, new)
    # a slowdown of every configuration alike moves their common level, not the drift
    unslowed = compare(base, FIVE_SWEEPS / "run-2").drift
    assert c.drift is not None and unslowed is not None and c.drift.pct is not None
    assert c.drift.pct == pytest.approx(unslowed.pct) and c.drift.pct < 100
    assert c.exit_code() == 1
    assert len(c.regressions) == len(c.points)
    assert main(["compare", str(base), str(new)]) == 1
