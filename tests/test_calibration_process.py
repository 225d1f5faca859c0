"""Issue 28, item 5: a run calibrates in a worker process of its own, never in its parent, so
the GPU memory calibration uses (matmul operands, copy buffers, a CUDA context) is given back
before the first point. On the CPU: the parent's calibration functions are made to fail, and a
sweep still gets its measured roofs; on a GPU: a fresh process that has calibrated CUDA holds
no CUDA context and no device memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Budget, SweepSpec
from gpubench.probes import bandwidth, calibration
from gpubench.run import calibration_process
from gpubench.run.context import RECALIBRATE_VARIABLE, recalibrating
from gpubench.run.sweep import run_sweep


@pytest.fixture
def no_calibration_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any calibration in this (the parent) process fails the test; the workers come from the
    fork server, which never saw these patches."""

    def refuse(*_: object) -> None:
        raise AssertionError("calibrated in the sweep's parent process")

    monkeypatch.setattr(calibration, "measure_matmul_tflops", refuse)
    monkeypatch.setattr(bandwidth, "measure_copy_gb_per_s", refuse)
    calibration.clear_memo()
    bandwidth.clear_memo()


@pytest.mark.usefixtures("no_calibration_here")
def test_a_sweep_calibrates_in_a_worker_and_its_points_get_the_roofs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(RECALIBRATE_VARIABLE)  # as a user's sweep: afresh (the session's is not)
    spec = SweepSpec(
        name="t",
        models=("mlp",),
        size="tiny",
        devices=("cpu",),
        batch_sizes=(4,),
        precisions=("fp32",),
        optimizers=("sgd",),
        budget=Budget.fixed(steps=3, warmup_steps=1),
    )
    # On a GPU host an earlier test in this process (pytest-xdist's worker) may have created a
    # CUDA context already; then only the gpu-marked test below, in a fresh process, can tell.
    cuda_before = torch.cuda.is_initialized()
    frame = run_sweep(spec, tmp_path / "run", confirm=False)
    captured = json.loads((tmp_path / "run" / "env.json").read_text())
    peak = captured["matmul_peaks"]["cpu"]["fp32"]
    assert peak["source"] == "measured" and peak["measured_tflops"] > 0
    assert captured["memory_bandwidth"]["cpu"]["source"] == "measured"
    assert set(captured["load"]) == {"load_average_1m", "cores", "other_load_cores"}
    # the point's worker read the roof the calibration worker cached
    (row,) = frame.to_dict("records")
    assert row["status"] == "ok" and row["peak_tflops"] == pytest.approx(peak["measured_tflops"])
    # one memo holds every calibration (the matmul peaks and the bandwidth)
    assert not calibration._memo, "nothing was calibrated here"
    assert cuda_before or not torch.cuda.is_initialized(), (
        "the sweep's parent created a CUDA context"
    )
    # issue 49: GPUBENCH_RECALIBRATE=0 takes the cache's figures (a machine calibrated once)
    monkeypatch.setenv(RECALIBRATE_VARIABLE, "0")
    run_sweep(spec, tmp_path / "again", confirm=False)
    again = json.loads((tmp_path / "again" / "env.json").read_text())
    assert again["matmul_peaks"]["cpu"]["fp32"]["source"] == "cache"
    assert again["matmul_peaks"]["cpu"]["fp32"]["measured_tflops"] == peak["measured_tflops"]
    monkeypatch.setenv(RECALIBRATE_VARIABLE, "yes")
    with pytest.raises(ConfigError, match=r"^invalid GPUBENCH_RECALIBRATE='yes'; allowed: 0 or 1$"):
        recalibrating()


@pytest.mark.usefixtures("no_calibration_here")
def test_the_capture_from_a_worker_holds_what_one_made_here_holds() -> None:
    from gpubench.store import env

    got = calibration_process.captured(["cpu"], ["fp32"], recalibrate=True)
    here = env.capture(["cpu"], ["fp32"])  # served from the cache the worker wrote
    assert set(got) == set(here) | {"load"}
    assert got["matmul_peaks"]["cpu"]["fp32"]["measured_tflops"] == pytest.approx(
        here["matmul_peaks"]["cpu"]["fp32"]["measured_tflops"]
    )
    assert here["matmul_peaks"]["cpu"]["fp32"]["source"] == "cache"
    assert got["memory_bandwidth"]["cpu"]["gb_per_s"] == here["memory_bandwidth"]["cpu"]["gb_per_s"]
    assert got["cpu"] == here["cpu"], "the worker runs torch's threads as the points do"


def test_thread_counts_are_calibrated_only_where_the_cpu_is_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    called: list[object] = []
    monkeypatch.setattr(calibration_process, "calibrate_threads", lambda *a: called.append(a))
    monkeypatch.setattr("gpubench.store.env.capture", lambda *a, **k: {})
    calibration_process.capture_env(["cuda"], ["fp32"], True, [1])
    assert called == []
    calibration_process.capture_env(["cpu", "cuda"], ["fp32"], True, [1])
    assert called == [([1], ["fp32"])]


_PARENT = """
import json, os, torch
from gpubench.run import calibration_process
from gpubench.probes import nvml
got = calibration_process.captured(["cuda"], ["fp32"], recalibrate=True)
initialized = torch.cuda.is_initialized()  # asked first: NVML's device lookup would init CUDA
nv = nvml._nvml()
handle = None if nv is None else nv.nvmlDeviceGetHandleByIndex(0)
listed = [] if nv is None else nv.nvmlDeviceGetComputeRunningProcesses(handle)
print(json.dumps({"initialized": initialized, "held": [p.pid for p in listed
                  if p.pid == os.getpid()], "peaks": sorted(got["matmul_peaks"])}))
"""


@pytest.mark.gpu
def test_after_calibrating_cuda_the_parent_holds_no_cuda_memory() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PARENT], capture_output=True, text=True, check=True, env=os.environ
    )
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["peaks"] == ["cuda:0"]
    assert answer["initialized"] is False, "the parent created a CUDA context"
    assert answer["held"] == []
