"""Issue 53: a device pool on one node (run.pool), run for real on the CPU with fake devices
(GPUBENCH_FAKE_DEVICES, the pool's test hook): each worker sees its own CUDA_VISIBLE_DEVICES,
at most one point per device runs at once, a k-device point never holds back single-device
points, a worker killed mid-point is one `error` row, Ctrl-C (a real SIGINT) keeps every
finished row and a resume measures only the rest."""

from __future__ import annotations

import dataclasses
import html
import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from isolation import gpubench_command, rows, subprocess_env

from gpubench.cli.commands import resume_command
from gpubench.cli.main import main
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.config.suite import load_suite
from gpubench.report.html import runs_section
from gpubench.report.runs import load_runs
from gpubench.run import pool
from gpubench.run.confirm import confirm
from gpubench.run.context import RunOptions
from gpubench.run.sweep import run_sweep
from gpubench.store import pace_record
from gpubench.store.wording import number, seconds

FOUR = ("0", "1", "2", "3")


def _spec(tmp_path: Path, models: str, batches: str = "[1, 2, 3, 4]") -> SweepSpec:
    suite = tmp_path / "pool.toml"
    suite.write_text(
        f'name = "pool"\nmodels = {models}\nsize = "tiny"\ndevices = ["cpu"]\n'
        f'batch_sizes = {batches}\nprecisions = ["fp32"]\noptimizers = ["sgd", "adamw"]\n'
    )
    spec = load_suite(suite)
    budget = dataclasses.replace(Budget.fixed(1, spec.budget.warmup_steps), profile_steps=0)
    return dataclasses.replace(spec, budget=budget)


def _sweep(spec: SweepSpec, out: Path, devices: tuple[str, ...], **kw: Any) -> None:
    run_sweep(spec, out, gpus=devices, confirm=False, **kw)


def _overlap(run_dir: Path) -> int:
    """The most points in flight at once, from phases.json's point times."""
    points = json.loads((run_dir / "phases.json").read_text())["points"]
    edges = sorted([(p["start"], 1) for p in points] + [(p["end"], -1) for p in points])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


@pytest.fixture
def fake4(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pool.FAKE_DEVICES_ENV, "4")


def test_four_devices_run_eight_points_at_most_four_at_once_each_seeing_its_own(
    tmp_path: Path, fake4: None
) -> None:
    out = tmp_path / "run"
    _sweep(_spec(tmp_path, '["pool_workloads:visible"]'), out, FOUR)
    got = rows(out)
    assert len(got) == 8 and {r["status"] for r in got} == {"ok"}
    assert len({Point.of(r).key() for r in got}) == 8
    for r in got:  # the worker that measured the point saw its device, and that device alone
        assert r["workload"] == f"visible={r['pool_devices']}"
        assert r["pool_devices"] in FOUR and 0 <= r["points_beside"] <= 3
    assert len({r["pool_devices"] for r in got}) > 1
    assert 1 < _overlap(out) <= 4  # at once, never more than a point per device
    record = json.loads((out / pool.POOL_FILE).read_text())
    assert record["devices"] == list(FOUR) and record["fake"] is True
    # its pace: the wall time from phases.json and the points per minute, in the report too
    pace = pace_record.of_folder(out)
    assert pace is not None and pace.points == 8
    points = json.loads((out / "phases.json").read_text())["points"]
    assert pace.wall_s >= max(p["written"] for p in points) - min(p["start"] for p in points)
    assert pace.per_minute() == pytest.approx(8 * 60 / pace.wall_s)
    assert pace.line() == (
        f"wall time {seconds(pace.wall_s)} (from the sweep's start): 8 points, "
        f"{number(8 * 60 / pace.wall_s)} per minute"
    )
    cell = html.escape(pace.line().removeprefix("wall time "))
    assert f"<td>{cell}</td>" in runs_section(load_runs([out]))


def test_a_two_device_point_does_not_hold_back_single_device_points() -> None:
    def point(nproc: int, batch: int) -> Point:
        parallel = "ddp" if nproc > 1 else "none"
        return Point("mlp", "tiny", "cuda", "fp32", "sgd", batch, parallel=parallel, nproc=nproc)

    spec = SweepSpec(name="t", models=("mlp",), devices=("cuda",))
    ddp, one, other = point(2, 8), point(1, 4), point(1, 2)
    order = pool.deal_order([one, ddp, other], spec)
    assert order == [ddp, one, other]  # largest budget first: nproc x the budget
    needs = lambda p: pool.need(p, 4, fake=False)  # noqa: E731
    assert pool.next_fit(order, 1, needs) == 1  # one device free: the next point that fits
    assert pool.next_fit(order, 2, needs) == 0  # two free: the DDP point, first in order
    assert pool.next_fit([ddp], 1, needs) is None  # it waits for its second device
    cpu = dataclasses.replace(one, device="cpu")
    assert pool.need(cpu, 4, fake=False) == 4 and pool.need(cpu, 4, fake=True) == 1


def test_a_worker_killed_mid_point_is_one_error_row_and_the_rest_complete(
    tmp_path: Path, fake4: None
) -> None:
    out = tmp_path / "run"
    _sweep(_spec(tmp_path, '["pool_workloads:killed_at_3"]'), out, ("0", "1"))
    got = rows(out)
    assert len(got) == 8
    failed = [r for r in got if r["status"] != "ok"]
    assert [(r["status"], r["batch_size"]) for r in failed] == [("error", 3), ("error", 3)]
    assert all("SIGKILL" in r["error"] for r in failed)
    # the devices whose workers were killed measured on, in fresh workers
    after = {r["pool_devices"] for r in got[got.index(failed[0]) + 1 :] if r["status"] == "ok"}
    assert after, "no point was measured after the kill"


HELD_POOL = """
name = "pool"
models = ["pool_workloads:visible_held"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [1, 2, 3, 4]
precisions = ["fp32"]
optimizers = ["sgd", "adamw"]
[model_options."pool_workloads:visible_held"]
hold = "{hold}"
"""


@pytest.mark.slow  # a sweep's process, then its resume
def test_ctrl_c_keeps_every_finished_row_and_the_resume_measures_only_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SIGINT to a pooled sweep's process group (as a terminal's Ctrl-C) once it has
    written a row: the dealing stops, the points in flight finish and every row is kept, exit
    status 130, and the resume command it prints keeps its --gpus; that command measures only
    the points without a row, each point once in all."""
    hold = tmp_path / "hold"
    hold.touch()  # each point sleeps HELD_S: 8 points on 2 devices take 6 s after the first
    suite = tmp_path / "pool.toml"
    suite.write_text(HELD_POOL.format(hold=hold))
    out = tmp_path / "run"
    # no report: it is drawn after the rows, which are what is checked (and the resume's hint)
    flags = ["--steps", "1", "--no-profile", "--no-report"]
    env = {**subprocess_env(), pool.FAKE_DEVICES_ENV: "4"}
    proc = subprocess.Popen(
        gpubench_command("sweep", str(suite), "--gpus", "0,1", "--out", str(out), *flags),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    results = out / "results.jsonl"
    deadline = time.monotonic() + 300
    while not (results.is_file() and results.read_text().endswith("\n")):  # a whole row
        assert proc.poll() is None, f"the sweep ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "the sweep wrote no row"
        time.sleep(0.01)
    at_signal = results.read_text()
    os.killpg(proc.pid, signal.SIGINT)  # the sweep and its workers, as a terminal's Ctrl-C
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "stopping after the point in flight" in stderr and "Traceback" not in stderr
    kept = results.read_text()
    assert kept.startswith(at_signal)  # every row written before the signal, unchanged
    finished = json.loads((out / "phases.json").read_text())["points"]
    assert len(rows(out)) == len(finished) < 8  # each point that ended has its row
    hint = stderr.strip().splitlines()[-1]
    assert hint.endswith(f"resume with: python -m gpubench sweep {suite} --resume {out} --gpus 0,1")

    monkeypatch.setenv(pool.FAKE_DEVICES_ENV, "4")
    hold.unlink()  # the rest unheld
    command = shlex.split(hint.split("resume with: ")[1])[3:]  # after `python -m gpubench`
    assert main([*command, *flags, "--no-confirm", "--quiet"]) == 0
    got = rows(out)
    assert results.read_text().startswith(kept)  # the rows kept, unchanged
    assert len(got) == 8 and len({Point.of(r).key() for r in got}) == 8  # the rest, once each
    assert {r["pool_devices"] for r in got[len(kept.splitlines()) :]} <= {"0", "1"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a machine without CUDA")
def test_gpus_without_cuda_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(pool.FAKE_DEVICES_ENV, raising=False)
    out = tmp_path / "run"
    assert main(["sweep", "--models", "mlp", "--gpus", "all", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--gpus needs CUDA devices" in err[0], err
    assert not out.exists()


def test_gpus_values_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert pool.parse("all") == "all" and pool.parse("0, 3,1") == ("0", "3", "1")
    for bad in ("0,0", "x", "1,,2", "-1"):
        with pytest.raises(ConfigError, match="allowed: all, or device indices"):
            pool.parse(bad)
    monkeypatch.setenv(pool.FAKE_DEVICES_ENV, "4")
    assert pool.resolve("all") == FOUR and pool.resolve(("3", "1")) == ("3", "1")
    with pytest.raises(ConfigError, match="names device 4, and this machine has 4"):
        pool.resolve(("4",))


def test_the_model_checks_and_the_confirmation_see_the_pools_first_device(
    tmp_path: Path, fake4: None
) -> None:
    """Under --gpus 2,3 nothing runs on a device outside the pool: the model checks' worker
    and the confirmation's (the pool drained) see device 2, the points 2 or 3."""
    log = tmp_path / "visible.log"
    spec = _spec(tmp_path, '["pool_workloads:visible_logged"]', batches="[1, 2]")
    table = {"pool_workloads:visible_logged": {"log": str(log)}}
    spec = dataclasses.replace(spec, optimizers=("sgd",), model_options=table)
    out = tmp_path / "run"
    run_sweep(spec, out, gpus=("2", "3"))
    (part,) = json.loads((out / "confirm.json").read_text())["partitions"]
    if part["status"] == "not needed":  # a busy machine flagged the rows contended: one was left
        clean = [{**r, "busy": False, "noisy": False} for r in rows(out)]
        confirm(out, clean, devices=("2", "3"))  # the sweep's own call, on rows it keeps both of
        (part,) = json.loads((out / "confirm.json").read_text())["partitions"]
    seen = log.read_text().splitlines()
    assert set(seen) <= {"visible=2", "visible=3"}, seen
    assert seen[0] == seen[-1] == "visible=2"  # the checks first, the confirmation last
    assert part["status"] != "not needed"  # the confirmation measured, in its own workers
    assert len(seen) > len(rows(out)) + 1


def test_the_resume_command_of_a_pooled_sweep_keeps_its_devices() -> None:
    hint = resume_command(Path("results/x"), RunOptions(gpus=("1", "3")))
    assert hint == "python -m gpubench sweep --resume results/x --gpus 1,3"
    assert "--gpus" not in resume_command(Path("results/x"), RunOptions())
