"""A broken model fails early and loudly (issue 22): before a sweep writes anything, each model
takes one training step in a worker (run.preflight); a model that fails it is exit status 2,
with its error and the last frames of its traceback, and no run folder. A model whose every
point ended in error is exit status 1; a row that timed no step is never marked busy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from isolation import ROOT, rows, subprocess_env

import gpubench
from gpubench.cli import main
from gpubench.cli.commands import FAILED_MODEL, failed_models
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.harness.tracebacks import last_frames
from gpubench.run.preflight import check_points
from gpubench.run.worker import run_point

SWEEP = ["sweep", "--size", "tiny", "--devices", "cpu", "--batch-sizes", "2,4"]
SWEEP += ["--precisions", "fp32,bf16", "--optimizers", "sgd,adamw", "--steps", "1", "--quiet"]

# What pip writes as the `gpubench` console script (gpubench.cli:main), so that a test runs it
# as installed from this checkout: the installed script may belong to another checkout.
CONSOLE_SCRIPT = """import sys
from gpubench.cli import main
if __name__ == "__main__":
    sys.exit(main())
"""


def _boom_sweep(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [*command, *SWEEP, "--models", "fault_workloads:boom"]
    return subprocess.run(
        argv, cwd=cwd, env=subprocess_env(), capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("entry", ["python -m gpubench", "gpubench script"])
def test_a_model_whose_forward_raises_is_exit_2_before_anything_is_written(
    entry: str, tmp_path: Path
) -> None:
    if entry == "gpubench script":
        script = tmp_path / "bin" / "gpubench"
        script.parent.mkdir()
        script.write_text(CONSOLE_SCRIPT)
        command = [sys.executable, str(script)]
    else:
        command = [sys.executable, "-m", "gpubench"]
    work = tmp_path / "work"
    work.mkdir()
    done = _boom_sweep(command, work)
    assert done.returncode == 2, done.stderr
    err = done.stderr.splitlines()
    error = next(i for i, line in enumerate(err) if line.startswith("gpubench: error: "))
    assert "fault_workloads:boom" in err[error] and "RuntimeError: boom-4711" in err[error]
    assert "nothing was written" in err[error]
    # the error's last frames, the user's own: the line that raised, in the user's file
    frames = err[error + 1 :]
    assert 1 <= len(frames) <= 6, done.stderr
    assert 'fault_workloads.py", line' in frames[0] and "in forward" in frames[0]
    assert frames[1].strip() == 'raise RuntimeError("boom-4711")'
    assert "Traceback" not in done.stderr
    assert list(work.iterdir()) == [], "no run folder (results/<timestamp>) is created"
    assert done.stdout == ""


def test_a_model_that_crashes_or_hangs_its_check_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    common = [*SWEEP, "--out", str(out)]
    assert main([*common, "--models", "fault_workloads:segfault"]) == 2
    err = capsys.readouterr().err
    assert "'fault_workloads:segfault' failed its check" in err
    assert "on cpu: the worker process died (signal SIGSEGV)" in err
    assert main([*common, "--models", "fault_workloads:hang", "--point-timeout", "2"]) == 2
    err = capsys.readouterr().err
    assert "on cpu: no result within 2 s; the worker was killed (--point-timeout)" in err
    assert len(err.splitlines()) == 1, "no traceback, no frames: the error's line alone"
    assert not out.exists()


def test_a_resumed_sweep_checks_its_models_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["sweep", "--models", "fault_workloads:boom_when_told", "--size", "tiny"]
    args += ["--devices", "cpu", "--batch-sizes", "2", "--precisions", "fp32"]
    args += ["--optimizers", "sgd", "--steps", "1", "--quiet", "--no-confirm"]
    assert main([*args, "--out", str(out)]) == 0
    before = (out / "results.jsonl").read_bytes()
    (out / "results.jsonl").write_bytes(b"")  # as if stopped before its point
    again = ["--models", "fault_workloads:boom_when_told"]
    resumed = subprocess.run(
        # the model named again: a resume imports no code the folder names
        [sys.executable, "-m", "gpubench", "sweep", "--resume", str(out), "--quiet", *again],
        cwd=ROOT,
        env={**subprocess_env(), "GPUBENCH_TEST_BOOM": "1"},  # the model's code changed
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 2, resumed.stderr
    assert "RuntimeError: boom-4711" in resumed.stderr
    assert (out / "results.jsonl").read_bytes() == b"" != before, "nothing written"


def test_the_check_runs_one_cheap_step_per_model_on_the_cpu_first() -> None:
    spec = SweepSpec(
        "s",
        ("mlp", "cnn", "mlp"),
        devices=("cuda", "cpu"),
        batch_sizes=(64, 16, 256),
        precisions=("bf16",),
        optimizers=("adamw",),
        compile=("compile",),
        model_options={"cnn": {"width": 8}},
    )
    tries = check_points(spec)
    assert [[(p.model, p.device) for p in t] for t in tries] == [
        [("mlp", "cpu"), ("mlp", "cuda")],
        [("cnn", "cpu"), ("cnn", "cuda")],
    ]
    p = tries[1][0]
    assert (p.batch_size, p.precision, p.optimizer, p.compile) == (16, "fp32", "sgd", "eager")
    assert p.model_options == '{"width": 8}'
    assert check_points(SweepSpec("s", ("mlp",), batch_sizes="auto"))[0][0].batch_size == 1
    assert check_points(SweepSpec("s", ("mlp",), mode="convergence")) == []


@pytest.mark.gpu
def test_a_model_that_runs_only_on_cuda_passes_its_check_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["sweep", "--models", "fault_workloads:cuda_only", "--size", "tiny"]
    args += ["--devices", "cpu,cuda", "--batch-sizes", "2", "--precisions", "fp32"]
    args += ["--optimizers", "sgd", "--steps", "2", "--quiet", "--no-confirm", "--out", str(out)]
    assert main(args) == 0
    assert {r["device"]: r["status"] for r in rows(out)} == {"cpu": "error", "cuda": "ok"}
    capsys.readouterr()
    assert main([*args[:-1], str(tmp_path / "cpu"), "--devices", "cpu"]) == 2
    assert "failed its check" in capsys.readouterr().err


def test_a_row_that_timed_no_step_is_not_marked_busy() -> None:
    # The worker runs long enough (0.2 s) for the load around it to be measured, and fails.
    failed = run_point(
        Point("fault_workloads:raises_after_a_pause", "tiny", "cpu", "fp32", "sgd", 2),
        Budget.fixed(1, 1),
    )
    assert failed["status"] == "error" and not failed["steps_measured"]
    assert failed["other_load_cores"] is not None, "the load was measured (Linux /proc/stat)"
    assert failed["busy"] is None
    timed = run_point(Point("mlp", "tiny", "cpu", "fp32", "sgd", 2), Budget.fixed(2, 1))
    assert timed["status"] == "ok" and timed["steps_measured"] == 2
    # two steps are too short for the load's clock: the load around them is the row's (issue 28)
    assert timed["other_load_cores"] is not None and isinstance(timed["busy"], bool)


def test_a_model_is_failed_when_every_one_of_its_points_ended_in_error() -> None:
    rows_ = [
        {"model": "a", "status": "error"},
        {"model": "a", "status": "error"},
        {"model": "b", "status": "error"},
        {"model": "b", "status": "ok"},
        {"model": "c", "status": "timeout"},
        {"model": "d", "status": "oom"},
    ]
    assert failed_models(rows_) == ["a"]
    assert FAILED_MODEL == 1


TRACEBACK = """Traceback (most recent call last):
  File "{gpubench}/run/worker.py", line 120, in run
    return ("ok", getattr(importlib.import_module(module), name)(*self.args))
                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/me/project/model.py", line 12, in forward
    h = self.block(x)
  File "/home/me/project/block.py", line 30, in forward
    raise RuntimeError("boom-4711")
  File "{torch}/nn/functional.py", line 1, in relu
    result = torch.relu(input)
RuntimeError: boom-4711
"""


def test_the_last_frames_shown_are_the_users_own() -> None:
    text = TRACEBACK.replace("{torch}", str(Path(torch.__file__).parent))
    text = text.replace("{gpubench}", str(Path(gpubench.__file__).parent))
    assert last_frames(text) == [
        '  File "/home/me/project/model.py", line 12, in forward',
        "    h = self.block(x)",
        '  File "/home/me/project/block.py", line 30, in forward',
        '    raise RuntimeError("boom-4711")',
    ]
    library_only = f'Traceback (most recent call last):\n  File "{torch.__file__}", line 3, in f\n'
    assert last_frames(library_only + "ValueError: x\n") == [
        f'  File "{torch.__file__}", line 3, in f'
    ]
    assert last_frames("no traceback here") == []
