"""The threads axis, from the command line and suite files to the rows, and what a sweep tells
the user on the way (the overridden suite, a plain NVML notice)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpubench.cli import main
from gpubench.config.errors import ConfigError
from gpubench.config.spec import SweepSpec
from gpubench.config.suite import load_suite
from gpubench.run import folder

ROOT = Path(__file__).resolve().parent.parent
SUITE = 'name = "t"\nmodels = ["mlp"]\nsize = "tiny"\n'


def test_suite_threads_are_an_axis(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(SUITE + 'threads = [1, "auto", 2]\nbatch_sizes = [2]\ndevices = ["cpu"]\n')
    spec = load_suite(path)
    assert spec.threads == (1, None, 2)
    assert [p.threads for p in spec.points()] == [1, None, 2]
    # suite.json keeps "what torch picks" as null, and reads back the same
    assert folder.spec_from_saved(folder.as_saved(spec)).threads == spec.threads


def test_threads_default_to_what_torch_picks() -> None:
    spec = SweepSpec(name="t", models=("mlp",), devices=("cpu",), batch_sizes=(2,))
    assert spec.threads == (None,) and spec.points()[0].threads is None


@pytest.mark.parametrize("bad", ["[0]", "[1.5]", '["two"]', "[true]", "[]", "2"])
def test_bad_thread_counts_are_refused_with_their_line(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(SUITE + f"threads = {bad}\n")
    with pytest.raises(ConfigError, match=r"line 4: .*(thread count|threads must be)"):
        load_suite(path)


@pytest.mark.parametrize("flag", ["0", "x", "1,-2", ","])
def test_bad_threads_flag_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    out = tmp_path / "run"
    assert main(["sweep", "--threads", flag, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpubench: error: argument --threads") and len(err.splitlines()) == 1
    assert not out.exists()


@pytest.mark.slow  # a sweep's process
def test_sweep_sets_the_threads_and_records_them(tmp_path: Path) -> None:
    """Through `python -m gpubench` as a user runs it: what the terminal shows, and the rows."""
    out = tmp_path / "run"
    args = ["--models", "mlp", "--size", "tiny", "--devices", "cpu", "--batch-sizes", "2"]
    args += ["--precisions", "fp32", "--optimizers", "sgd", "--threads", "1,auto"]
    # no profile, no confirmation: neither sets or records threads (issue 49: the test's time)
    args += ["--steps", "2", "--no-profile", "--no-confirm", "--quiet", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "gpubench", "sweep", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    err = done.stderr
    # the suite as changed by the command line, not the shipped one as it is
    assert "suite 'quick' with --models, --size, --devices, --batch-sizes" in err
    assert "--threads, --steps, 2 points on cpu" in err
    # a CPU-only sweep says nothing of NVML, present or not (issue 30), and no Python warning
    assert [line for line in err.splitlines() if "NVML" in line] == []
    assert "Warning:" not in err and "warn_if_unavailable" not in err
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    run_env = json.loads((out / "env.json").read_text())
    default = run_env["cpu"]["torch_threads"]
    assert [(r["threads"], r["torch_threads"]) for r in rows] == [(1, 1), (None, default)]
    assert all(r["status"] == "ok" and r["workload"] == "mlp" for r in rows)
    assert all(isinstance(r["busy"], bool) or r["busy"] is None for r in rows)
    assert set(run_env["load"]) == {"load_average_1m", "cores", "other_load_cores"}
    assert "mlp/tiny" in done.stdout and "1 thread" in done.stdout


def test_a_run_made_before_the_threads_axis_resumes(tmp_path: Path) -> None:
    spec = SweepSpec(name="t", models=("mlp",), devices=("cpu",), batch_sizes=(2,))
    old = folder.as_saved(spec)
    del old["threads"]
    (tmp_path / "suite.json").write_text(json.dumps(old))
    folder.check_resumable(tmp_path, spec, extend=False)  # the default then: what torch picks
    with pytest.raises(ConfigError, match="threads"):
        folder.check_resumable(tmp_path, replace(spec, threads=(1,)), extend=False)


def test_each_thread_count_gets_its_own_bandwidth_roof(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a threads axis the sweep calibrates the bandwidth (the ridge rule's other roof) per
    thread count, as it does the matmul peak, and a point reads its own thread count's."""
    import torch

    from gpubench.harness.threads import intra_op_threads
    from gpubench.probes import bandwidth, calibration
    from gpubench.run.calibration_process import calibrate_threads

    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    bandwidth.clear_memo()
    calibration.clear_memo()
    other = 1 if torch.get_num_threads() != 1 else 2
    spec = SweepSpec(name="t", models=("mlp",), devices=("cpu",), threads=(None, other))
    with intra_op_threads(other):
        assert bandwidth.cached_bandwidth("cpu") is None
    calibrate_threads([t for t in spec.threads if t is not None], spec.precisions)
    with intra_op_threads(other):
        measured = bandwidth.cached_bandwidth("cpu")
        assert measured is not None and measured.gb_per_s > 0
        assert calibration.matmul_peak("cpu", "fp32") is not None
    assert f"threads={other}|" in next(iter(json.loads(bandwidth.bandwidth_file().read_text())))
    bandwidth.clear_memo()
    calibration.clear_memo()
