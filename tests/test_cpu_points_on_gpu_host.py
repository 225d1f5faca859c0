"""CPU parallel points on a GPU host run on the CPU's terms: FSDP2 shards over a CPU mesh and no
rank selects a CUDA device. CUDA's presence is simulated in the ranks (tests/fake_cuda_host.py):
there selecting a CUDA device fails, as it does on a host with fewer GPUs than ranks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpubench.config.spec import Budget, Point
from gpubench.run.ranks import launch, run_parallel_point
from gpubench.store.results import read_rows

TESTS = Path(__file__).resolve().parent


def _point(model: str = "mlp", parallel: str = "fsdp", nproc: int = 2) -> Point:
    return Point(model, "tiny", "cpu", "fp32", "adamw", 4, parallel=parallel, nproc=nproc)


def test_the_pretended_host_refuses_a_cuda_device_and_names_cuda_the_accelerator() -> None:
    # the simulation itself, in a rank: what the tests below rely on
    import fake_cuda_host

    ((available, accelerator, refused),) = launch(
        fake_cuda_host.pretended, (), nproc=1, timeout_s=60
    )
    assert available and accelerator == "cuda"
    assert fake_cuda_host.SET_DEVICE_REFUSED in refused


def test_a_cpu_fsdp_point_keeps_its_parameters_on_the_cpu_with_cuda_present() -> None:
    import fake_cuda_host

    per_rank = launch(fake_cuda_host.fsdp_parameters, (_point(),), nproc=2, timeout_s=60)
    for parameters in per_rank:
        assert parameters and set(parameters) == {("cpu", "cpu")}, parameters


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_a_cpu_parallel_point_measures_with_cuda_present(parallel: str) -> None:
    row = run_parallel_point(
        _point("fake_cuda_host:mlp", parallel), Budget.fixed(2, warmup_steps=1), timeout_s=120
    )
    assert row["status"] == "ok", row["error"]
    assert row["device"] == "cpu" and row["backend"] == "gloo"


SUITE = """
name = "cpu-on-gpu-host"
models = ["mlp"]
size = "tiny"
devices = ["cpu"]
batch_sizes = [8]
optimizers = ["sgd"]
parallel = ["ddp", "fsdp"]
nproc = [2]
[budget]
warmup_steps = 1
min_steps = 2
max_steps = 2
min_time_s = 0
max_time_s = 1
profile_steps = 0
warmup_min_s = 0
warmup_max_s = 0
"""


@pytest.mark.slow  # a torchrun launch of two ranks
@pytest.mark.skipif(shutil.which("torchrun") is None, reason="needs torchrun on PATH")
def test_a_cpu_torchrun_launch_sets_no_cuda_device(tmp_path: Path) -> None:
    # Two ranks rather than the README's four (issue 49: half the processes): on the pretended
    # host every rank's selection of a CUDA device fails, the first's as the fourth's, and which
    # device a rank would select for its local rank is the parametrized test below.
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    command = [
        "torchrun", "--standalone", "--nproc-per-node", "2",
        "-m", "fake_cuda_host", "sweep", str(suite), "--out", str(out), "--quiet", "--no-report",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_rows(out)
    assert [(r["parallel"], r["status"]) for r in rows] == [("ddp", "ok"), ("fsdp", "ok")]
    assert all(r["world_size"] == 2 and r["backend"] == "gloo" for r in rows)


@pytest.mark.parametrize(
    ("devices", "local_rank", "gpus", "selected"),
    [
        (("cpu",), 0, 4, None),  # CPU points: none, however many GPUs
        (("cpu",), 3, 1, None),
        (("cpu", "cuda"), 1, 4, 1),  # CUDA points: this rank's GPU
        (("cuda",), 3, 1, None),  # more ranks than GPUs: their CUDA points are refused
    ],
)
def test_a_torchrun_rank_selects_a_cuda_device_only_for_cuda_points(
    monkeypatch: pytest.MonkeyPatch,
    devices: tuple[str, ...],
    local_rank: int,
    gpus: int,
    selected: int | None,
) -> None:
    import torch

    from gpubench.config.spec import SweepSpec
    from gpubench.run.launched import cuda_device

    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    spec = SweepSpec("s", models=("mlp",), devices=devices, parallel=("ddp",), nproc=(4,))
    assert cuda_device(spec, local_rank) == selected
    assert chosen == ([] if selected is None else [selected])


def test_cuda_points_with_more_ranks_than_gpus_are_unsupported_naming_the_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The README's `torchrun --nproc-per-node 4 ... sweep scaling --nproc 4` on a 1-GPU host:
    # the suite's devices are auto, so its CUDA points are rows that say why they did not run,
    # before any rank could put a second NCCL rank on the GPU; its CPU points run.
    import torch

    from gpubench.config.spec import SweepSpec
    from gpubench.harness import parallel

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(parallel.dist, "is_nccl_available", lambda: True)
    spec = SweepSpec("s", models=("mlp",), devices=("auto",), parallel=("ddp",), nproc=(4,))
    assert spec.resolved_devices() == ("cpu", "cuda")
    cpu = _point("mlp", "ddp", 4)
    cuda = Point(**{**cpu.to_dict(), "device": "cuda"})
    assert parallel.unsupported_reason(cuda) == (
        "nproc 4 needs 4 CUDA devices on this node, it has 1 (NCCL cannot put two ranks on one GPU)"
    )
    assert parallel.unsupported_reason(cpu) is None
    one_rank = Point(**{**cuda.to_dict(), "nproc": 1})
    assert parallel.unsupported_reason(one_rank) is None  # a rank per GPU runs
