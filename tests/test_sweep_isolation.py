"""The issue's acceptance on the CPU: a sweep with an injected out-of-memory point (under
--max-memory), an injected crash and an injected hang finishes, records each with its status,
and measures every other point. (The crash and the error come from their models' second step:
a model that fails its first is refused before the sweep, see test_preflight.py.)"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from isolation import cap_text, rows

from gpubench.cli import main
from gpubench.config.spec import Point, SweepSpec
from gpubench.run import batch_plan, preflight

FAULTS = """
name = "faults"
models = ["mlp", "fault_workloads:segfault_later", "fault_workloads:raises_later",
          "fault_workloads:hungry"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [2, 1024, 4096]
precisions = ["fp32"]
optimizers = ["sgd"]
"""


@pytest.mark.slow  # twelve points, each in a worker
def test_a_sweep_survives_oom_crash_and_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "faults.toml"
    suite.write_text(FAULTS)
    out = tmp_path / "run"
    args = ["sweep", str(suite), "--out", str(out), "--quiet", "--steps", "2"]
    # no profile, no confirmation (issue 49: they made no row of these faults, for seconds)
    args += ["--no-profile", "--no-confirm"]
    # No short point timeout: points that must end ok may be slow on a loaded machine.
    # Exit status 1: every point of two models ended in error.
    assert main([*args, "--max-memory", cap_text()]) == 1
    got = {
        (r["model"].removeprefix("fault_workloads:").removesuffix("_later"), r["batch_size"]): r
        for r in rows(out)
    }
    assert len(got) == len(rows(out)) == 12, "every point exactly once"
    status = {k: r["status"] for k, r in got.items()}
    assert status == {
        **{("mlp", b): "ok" for b in (2, 1024, 4096)},
        **{("segfault", b): "error" for b in (2, 1024, 4096)},
        **{("raises", b): "error" for b in (2, 1024, 4096)},
        ("hungry", 2): "ok",
        ("hungry", 1024): "oom",
        ("hungry", 4096): "oom",
    }
    assert all("signal SIGSEGV" in got["segfault", b]["error"] for b in (2, 1024, 4096))
    # an exception's traceback is kept in results.jsonl, down to the line that raised
    raised = got["raises", 2]
    assert raised["error"] == "ValueError: injected failure in forward"
    assert raised["traceback"].startswith("Traceback (most recent call last)")
    assert 'fault_workloads.py", line' in raised["traceback"]
    assert "can't allocate memory" in got["hungry", 1024]["error"]
    assert got["hungry", 4096]["error"] == "skipped: B=1024 ran out of memory"
    assert got["hungry", 4096]["point_time_s"] is None, "a skipped point is never tried"
    assert all(got["mlp", b]["steps_measured"] == 2 for b in (2, 1024, 4096))
    assert "traceback" not in (out / "results.csv").read_text().splitlines()[0].split(",")
    printed = capsys.readouterr()
    assert "error" in printed.out and "skipped" in printed.out
    # the terminal names the models that measured nothing, shows the first traceback's last
    # frames (the crash left none) and says where every traceback is kept
    err = printed.err.splitlines()
    for model in ("segfault_later", "raises_later"):
        told = f"gpubench: error: all 3 points of fault_workloads:{model} ended in error"
        assert any(line.startswith(told) for line in err)
    first = "fault_workloads:segfault_later cpu fp32 sgd B=2: the worker process died"
    at = next(i for i, line in enumerate(err) if "6 points ended in error" in line)
    assert f"gpubench: error: 6 points ended in error; the first, {first}" in err[at]
    assert err[at + 1] == (
        "gpubench: the first with a traceback, fault_workloads:raises_later cpu fp32 sgd B=2: "
        "ValueError: injected failure in forward"
    )
    frames = err[at + 2 : -1]
    assert 2 <= len(frames) <= 6 and 'fault_workloads.py", line' in frames[-2]
    assert frames[-1] == '    raise ValueError("injected failure in forward")'
    assert "`traceback` field" in err[-1] and str(out / "results.jsonl") in err[-1]


def test_a_hung_point_is_a_timeout_row_and_the_sweep_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only points that never end run under the short timeout: its outcome is not a race. Their
    # model's check step, one step before the sweep, ends, but as a fresh worker's first
    # training step it pays one-off costs that a machine as loaded as a 16-core GPU host under
    # `pytest -n 14` can stretch past any short limit: the sweep is then refused (exit 2).
    # Here it runs without a limit; the check's own limit is test_preflight's subject.
    check_models = preflight.check_models

    def unlimited_check(spec: SweepSpec, max_memory: int | None, *rest: Any) -> None:
        check_models(spec, max_memory, None, *rest[1:])

    monkeypatch.setattr(preflight, "check_models", unlimited_check)
    out = tmp_path / "run"
    args = ["sweep", "--models", "fault_workloads:hang_later", "--size", "tiny"]
    args += [
        "--devices",
        "cpu",
        "--precisions",
        "fp32",
        "--optimizers",
        "sgd",
        "--batch-sizes",
        "2,4",
        "--out",
        str(out),
        "--quiet",
        "--no-confirm",  # timeout rows have nothing to confirm
        "--point-timeout",
        "2",  # never a race: these points never end, however long the limit
    ]
    assert main(args) == 0, "a timeout is no error: the exit status stays 0"
    got = rows(out)
    assert [r["status"] for r in got] == ["timeout", "timeout"]
    assert all("no result within 2 s (--point-timeout)" in r["error"] for r in got)


AUTO = """
name = "auto"
models = ["fault_workloads:hungry"]
size = "tiny"
devices = ["cpu"]
batch_sizes = "auto"
precisions = ["fp32"]
optimizers = ["sgd"]
"""


@pytest.mark.slow  # a growing series, then its resume
def test_auto_batch_sizes_grow_until_the_series_answers(tmp_path: Path) -> None:
    """Issue 42: `--batch-sizes auto` on a single-process speed sweep probes no memory limit (a
    probe at B=65,536 took 64.5 s on the CPU): the series starts at B=1 and grows by the growth
    rule until throughput flattens or memory ends (here a cap a few hundred MiB up)."""
    suite = tmp_path / "auto.toml"
    suite.write_text(AUTO)
    out = tmp_path / "run"
    args = ["sweep", str(suite), "--out", str(out), "--quiet", "--steps", "1", "--no-confirm"]
    assert main([*args, "--max-memory", cap_text()]) == 0
    assert not (out / "maxbatch.json").exists()
    got = rows(out)
    batches = [r["batch_size"] for r in got]
    assert batches[0] == 1 and len(set(batches)) == len(batches)
    assert {r["status"] for r in got} <= {"ok", "oom"}
    (decision,) = json.loads((out / "growth.json").read_text())["stops"]
    assert decision["next_batch"] is None
    assert decision["reason"] in ("flattened", "memory ends"), decision
    oom = [r["batch_size"] for r in got if r["status"] == "oom"]
    if decision["reason"] == "memory ends":
        assert oom and all(b < min(oom) for b in batches if b not in oom)
    # a resumed sweep measures nothing again
    resume = ["sweep", str(suite), "--resume", str(out), "--quiet", "--steps", "1"]  # names code
    resume += ["--no-confirm"]
    assert main([*resume, "--max-memory", cap_text()]) == 0
    assert [r["batch_size"] for r in rows(out)] == batches


def test_auto_search_is_kept_per_whole_identity() -> None:
    base = Point("mlp", "tiny", "cpu", "fp32", "sgd", 1)
    others = [
        dataclasses.replace(base, seed=1),
        dataclasses.replace(base, compile="compile"),
        dataclasses.replace(base, channels_last=True),
        dataclasses.replace(base, cuda_graph=True),
        dataclasses.replace(base, data="host"),
    ]
    keys = {batch_plan.rank_layout(p).key() for p in [base, *others]}
    assert len(keys) == 1 + len(others)
    wider = dataclasses.replace(base, batch_size=64)
    assert batch_plan.rank_layout(wider).key() == batch_plan.rank_layout(base).key()


def test_an_auto_series_that_errs_stops_there(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["sweep", "--models", "fault_workloads:picky", "--size", "tiny", "--devices", "cpu"]
    args += ["--precisions", "fp32", "--optimizers", "sgd", "--batch-sizes", "auto"]
    assert (
        main([*args, "--out", str(out), "--quiet", "--steps", "1", "--max-memory", cap_text()]) == 0
    )
    # grown from B=1 while throughput rose; the batch that failed is a row of its own, its
    # error, and the series stops there (on a contended machine a one-step reading may show
    # throughput flat before the failure: then it stops as flattened, never past a failure)
    got = {r["batch_size"]: r["status"] for r in rows(out)}
    (decision,) = json.loads((out / "growth.json").read_text())["stops"]
    assert got[1] == "ok" and all(s == "ok" for b, s in got.items() if b <= 4)
    failed = [b for b, s in got.items() if s != "ok"]
    if decision["reason"] == "failed":
        assert failed == [max(got)] and failed[0] > 4 and got[failed[0]] == "error"
        assert f"B={failed[0]} ended error" in decision["detail"]
    else:
        assert decision["reason"] == "flattened" and not failed
