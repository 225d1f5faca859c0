"""Rows of several machines (issue 23): every row names its machine (`host`, `device_name`), a
merge of two machines' folders says which machines it joined and keeps each row's device, the
report names and sizes each row's device from its own machine, and a duplicate point keeps
its `ok` row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpubench.cli.main import main
from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.probes.calibration import cpu_model
from gpubench.report import analysis as A
from gpubench.report import build_report
from gpubench.report import series as S
from gpubench.report.runs import capacities, combine, load_runs
from gpubench.run.merge import merge
from gpubench.run.sweep import run_sweep
from gpubench.store.env import hostname
from gpubench.store.results import ResultStore, read_rows
from gpubench.store.row import make_row

GiB = 1024**3
A100 = {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "memory_bytes": 40 * GiB}
H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 80 * GiB}
BATCHES = (16, 64, 256)


def _env(host: str, gpu: dict[str, Any], cpu: str) -> dict[str, Any]:
    return {
        "captured_at": "2026-11-24T10:00:00+00:00",
        "hostname": host,
        "gpubench": {"version": "0.1.0", "git_commit": "abc123"},
        "python": "3.11.7",
        "os": "Linux",
        "cpu": {"model": cpu, "usable_cores": 8, "torch_threads": 8},
        "torch": {"version": "2.13.0", "cuda": "13.0", "cudnn": None},
        "nvml": {"driver_version": "580.0"},
        "gpus": [gpu],
    }


def _row(b: int, step_s: float, machine: dict[str, Any] | None, status: str = "ok") -> dict:
    """A CUDA row of mlp at batch `b`, measured (synthetically) on `machine` (host and
    device_name; None: an old row, written before rows named their machine)."""
    point = Point("mlp", "small", "cuda", "fp32", "adamw", b)
    if status != "ok":
        row = make_row(point, status, error="CUDA out of memory (synthetic)")
    else:
        used = 2 * GiB + 20e6 * b
        row = make_row(
            point,
            "ok",
            steps_measured=10,
            step_time_s=step_s,
            samples_per_step=b,
            samples_per_s=b / step_s,
            torch_peak_allocated_bytes=int(used),
            nvml_peak_used_bytes=int(used * 1.1),
        )
    if machine is None:  # as rows were before issue 23
        del row["host"], row["device_name"]
    else:
        row.update(machine)
    return row


def _folder(path: Path, rows: list[dict[str, Any]], env: dict[str, Any]) -> Path:
    store = ResultStore(path)
    for row in rows:
        store.append(row)
    store.write_json("env.json", env)
    return path


def _two_machines(
    root: Path, old_rows: bool = False, same_points: bool = False
) -> tuple[Path, Path]:
    """Three points on an A100 machine and three on an H100 machine: the same points, or (as
    shards of one sweep) each its own batch sizes."""
    a_machine = None if old_rows else {"host": "a100-box", "device_name": A100["name"]}
    h_machine = None if old_rows else {"host": "h100-box", "device_name": H100["name"]}
    a = _folder(
        root / "a100",
        [_row(b, 1e-3 * (1 + b / 64), a_machine) for b in BATCHES],
        _env("a100-box", A100, "AMD EPYC 7742"),
    )
    h = _folder(
        root / "h100",
        [_row(b, 0.5e-3 * (1 + b / 64), h_machine) for b in _h100_batches(same_points)],
        _env("h100-box", H100, "Intel Xeon Platinum 8480"),
    )
    return a, h


def _h100_batches(same_points: bool) -> tuple[int, ...]:
    return BATCHES if same_points else tuple(2 * b for b in BATCHES)


def test_a_new_row_names_its_machine() -> None:
    row = make_row(Point("mlp", "tiny", "cpu", "fp32", "sgd", 4), "ok")
    assert row["host"] == hostname() and row["host"]
    assert row["device_name"] == cpu_model() and row["device_name"]


def test_measured_rows_single_process_and_parallel_name_their_machine(tmp_path: Path) -> None:
    spec = SweepSpec(
        "machines-test",
        models=("mlp",),
        size="tiny",
        devices=("cpu",),
        batch_sizes=(4,),
        optimizers=("sgd",),
        parallel=("none", "ddp"),
        nproc=(2,),
        budget=Budget.fixed(2, warmup_steps=1),
    )
    run_sweep(spec, tmp_path / "run", point_timeout_s=120)
    rows = read_rows(tmp_path / "run")
    env = json.loads((tmp_path / "run" / "env.json").read_text())
    assert sorted(str(r.get("parallel")) for r in rows) == ["ddp", "none"]
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    for r in rows:
        assert r["host"] == env["hostname"] == hostname()
        assert r["device_name"] == env["cpu"]["model"] == cpu_model()


@pytest.mark.parametrize("same_points", [False, True], ids=["shards", "same-points"])
@pytest.mark.parametrize("old_rows", [False, True], ids=["rows-name-machine", "old-rows"])
def test_a_merge_of_two_machines_keeps_each_rows_device(
    tmp_path: Path, old_rows: bool, same_points: bool
) -> None:
    """The A100 points are drawn, named and fitted as the A100's, not in the H100's line with
    its 80 GB (the first folder's GPU once named every row). The same point on the two GPUs is
    two rows, not a duplicate."""
    a, h = _two_machines(tmp_path, old_rows, same_points)
    merged = merge([a, h], tmp_path / "merged")
    assert merged.rows == 2 * len(BATCHES) and merged.dropped == 0
    rows = read_rows(tmp_path / "merged")
    # old rows get their machine from their own folder's env.json, not the first folder's
    assert [(r["host"], r["device_name"]) for r in rows] == [("a100-box", A100["name"])] * len(
        BATCHES
    ) + [("h100-box", H100["name"])] * len(BATCHES)

    runs = load_runs([tmp_path / "merged"])
    frame = combine(runs)
    a_name, h_name = f"cuda ({A100['name']})", f"cuda ({H100['name']})"
    assert list(frame["device_name"]) == [a_name] * len(BATCHES) + [h_name] * len(BATCHES)
    # two lines, one per GPU, each labelled with its own GPU
    assert frame.groupby("series")["device_name"].nunique().eq(1).all()
    labels = S.labels(frame)
    by_device = dict(zip(frame["device_name"], frame["series"], strict=True))
    assert "A100" in labels[by_device[a_name]] and "H100" in labels[by_device[h_name]]
    # the memory fit of each line is against its own GPU's memory
    capacity = capacities(runs)
    assert capacity[(runs[0].name, a_name)] == A100["memory_bytes"]
    assert capacity[(runs[0].name, h_name)] == H100["memory_bytes"]
    summary = A.series_summary(frame, capacity).set_index("series")
    assert summary.loc[by_device[a_name], "capacity_bytes"] == A100["memory_bytes"]
    assert summary.loc[by_device[h_name], "capacity_bytes"] == H100["memory_bytes"]


def test_merge_names_the_machines_it_joined(tmp_path: Path, capsys: Any) -> None:
    a, h = _two_machines(tmp_path)
    out = tmp_path / "merged"
    assert main(["merge", str(a), str(h), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "joined 2 machines: a100-box: NVIDIA A100-SXM4-40GB, CPU AMD EPYC 7742; " in printed
    assert "h100-box: NVIDIA H100 80GB HBM3, CPU Intel Xeon Platinum 8480" in printed
    env = json.loads((out / "env.json").read_text())
    assert [m["hostname"] for m in env["machines"]] == ["a100-box", "h100-box"]
    assert [m["gpus"][0]["name"] for m in env["machines"]] == [A100["name"], H100["name"]]
    record = json.loads((out / "merge.json").read_text())
    assert [m.split(":")[0] for m in record["machines"]] == ["a100-box", "h100-box"]

    # the report's Runs and Environment show both machines
    html = (out / "report.html").read_text()
    runs_table = html[html.index("<h2>Runs</h2>") : html.index("<h2>Environment</h2>")]
    for text in ("a100-box", "h100-box", A100["name"], H100["name"]):
        assert text in runs_table
    environment = html[html.index("<h2>Environment</h2>") :]
    for text in ("Intel Xeon Platinum 8480", "AMD EPYC 7742", "40.0 GiB", "80.0 GiB"):
        assert text in environment.split("<details>")[0]


def test_one_machines_merge_says_so(tmp_path: Path, capsys: Any) -> None:
    env = _env("a100-box", A100, "AMD EPYC 7742")
    machine = {"host": "a100-box", "device_name": A100["name"]}
    a = _folder(tmp_path / "a", [_row(16, 1e-3, machine)], env)
    b = _folder(tmp_path / "b", [_row(64, 1e-3, machine)], env)
    assert main(["merge", str(a), str(b), "--out", str(tmp_path / "m")]) == 0
    printed = capsys.readouterr().out
    assert "one machine: a100-box: NVIDIA A100-SXM4-40GB, CPU AMD EPYC 7742" in printed
    assert "joined" not in printed


@pytest.mark.parametrize("order", ["failed-first", "ok-first"])
def test_a_duplicate_point_keeps_its_ok_row(tmp_path: Path, order: str) -> None:
    env = _env("a100-box", A100, "AMD EPYC 7742")
    machine = {"host": "a100-box", "device_name": A100["name"]}
    failed = [_row(16, 1e-3, machine), _row(64, 0.0, machine, status="oom")]
    ok = [_row(64, 2e-3, machine)]
    first, second = (failed, ok) if order == "failed-first" else (ok, failed)
    a = _folder(tmp_path / "a", first, env)
    b = _folder(tmp_path / "b", second, env)
    merged = merge([a, b], tmp_path / "m", allow_duplicates=True)
    rows = pd.DataFrame(read_rows(tmp_path / "m")).set_index("batch_size")
    assert rows.loc[64, "status"] == "ok" and rows.loc[64, "step_time_s"] == 2e-3
    # the kept row stands where the point first appeared
    want = [16, 64] if order == "failed-first" else [64, 16]
    assert list(rows.index) == want
    assert merged.rows == 2 and merged.dropped == 1
    assert merged.replaced == (1 if order == "failed-first" else 0)


def test_the_report_of_a_merged_folder_renders(tmp_path: Path) -> None:
    a, h = _two_machines(tmp_path)
    merge([a, h], tmp_path / "merged")
    page = build_report([tmp_path / "merged"]).read_text()
    assert "A100-SXM4-40GB" in page and "H100 80GB HBM3" in page


@pytest.mark.gpu
def test_a_cuda_row_names_its_gpu_as_env_json_does() -> None:
    import torch

    from gpubench.store.env import gpu_info

    row = make_row(Point("mlp", "tiny", "cuda", "fp32", "sgd", 4), "ok")
    index = torch.cuda.current_device()
    assert row["device_name"] == torch.cuda.get_device_name(index)
    assert row["device_name"] == gpu_info()[index]["name"]


def test_merge_sets_efficiency_across_machines_only_when_asked(tmp_path: Path) -> None:
    # the one-process baseline on the A100 box, the DDP x2 point on the H100 box: two machines'
    # figures are no scaling, unless the user says the machines are alike (--across-machines)
    def parallel_row(nproc: int, scaling: str | None, rate: float, host: str) -> dict:
        p = Point("mlp", "small", "cuda", "fp32", "adamw", 64, parallel="ddp", nproc=nproc)
        p = Point(**{**p.to_dict(), "scaling": scaling})
        row = make_row(p, "ok", samples_per_s=rate, step_time_s=64 * nproc / rate)
        return row | {"host": host, "device_name": A100["name"], "world_size": nproc}

    a = _folder(tmp_path / "a", [parallel_row(1, None, 1000.0, "a-box")], _env("a-box", A100, "x"))
    b = _folder(
        tmp_path / "b", [parallel_row(2, "weak", 1500.0, "b-box")], _env("b-box", A100, "x")
    )
    merge([a, b], tmp_path / "apart")
    merge([a, b], tmp_path / "across", across_machines=True)
    apart = [r for r in read_rows(tmp_path / "apart") if r["nproc"] == 2]
    across = [r for r in read_rows(tmp_path / "across") if r["nproc"] == 2]
    assert apart[0]["scaling_efficiency"] is None
    assert across[0]["scaling_efficiency"] == pytest.approx(0.75)
    assert main(["merge", str(a), str(b), "--out", str(tmp_path / "cli"), "--across-machines"]) == 0
    (cli,) = [r for r in read_rows(tmp_path / "cli") if r["nproc"] == 2]
    assert cli["scaling_efficiency"] == pytest.approx(0.75)
