"""Synthetic run folders for the report and compare tests: rows built with results.make_row from
a simple cost model (step time = floor + per-sample x B, lognormal noise), so every chart has data
including the GPU-only and convergence fields the CPU cannot measure here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from gpubench.config.spec import Point
from gpubench.store.results import ResultStore
from gpubench.store.row import make_row

GiB = 1024**3
# What gpubench's parent held of an H100 through a sweep (issue 28: 5.4-5.7 GiB): device-wide
# NVML counts it, the point's own memory does not.
PARENT_HELD = int(5.5 * GiB)
H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 80 * GiB}


# Every chart the report draws, each once: the runs of cpu_gpu_runs and convergence_run
# together draw them all.
CHART_FILES = (
    "throughput.png",
    "step_time.png",
    "memory.png",
    "compute.png",
    "energy.png",
    "efficiency.png",  # issue 32
    "speedup.png",
    "loss_curves.png",
    "time_to_target.png",
    "time_to_target_predicted.png",  # issue 51
    "breakdown.png",
    "roofline.png",
)


def env(gpus: list[dict[str, Any]] | None = None, threads: int = 2) -> dict[str, Any]:
    return {
        "captured_at": "2026-11-22T10:00:00+00:00",
        "hostname": "test-host",
        "gpubench": {"version": "0.1.0", "git_commit": "abc123"},
        "python": "3.11.7",
        "os": "Linux",
        "cpu": {"model": "Test CPU", "usable_cores": 2, "torch_threads": threads},
        "torch": {"version": "2.13.0", "cuda": "13.0" if gpus else None, "cudnn": None},
        "gpus": gpus or [],
    }


def speed_row(
    point: Point,
    floor_s: float,
    per_sample_s: float,
    rng: np.random.Generator,
    n: int = 40,
    slowdown: float = 1.0,
    memory: tuple[float, float] | None = None,
    capacity: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One row: raw step times drawn around floor + per_sample x B (times `slowdown`); `memory`
    = (fixed, per-sample) bytes; a predicted use above `capacity` gives an `oom` row."""
    b = point.batch_size
    # The synthetic machine env() describes, not the one running the test (issue 23).
    machine = {"host": "test-host", "device_name": "Test CPU"}
    if point.device != "cpu":
        machine["device_name"] = H100["name"]
    if memory is not None and capacity is not None and 1.1 * (memory[0] + memory[1] * b) > capacity:
        return make_row(point, "oom", error="CUDA out of memory (synthetic)", **machine)
    times = (floor_s + per_sample_s * b) * slowdown * rng.lognormal(0.0, 0.03, n)
    median = float(np.median(times))
    q1, q3 = np.percentile(times, [25, 75])
    values: dict[str, Any] = {
        "steps_measured": n,
        "step_time_s": median,
        "step_time_iqr_s": float(q3 - q1),
        "samples_per_step": b,
        "samples_per_s": b / median,
        "flops_per_step": 1e9 * b,
        "tflops": 1e9 * b / median / 1e12,
        "loss_first": 2.3,
        "loss_last": 1.9,
        "torch_threads": 2,
        "step_times_s": [float(t) for t in times],
        **machine,
    }
    values.update(why_values(median, floor_s, per_sample_s * b, values["flops_per_step"]))
    if memory is not None:
        used = memory[0] + memory[1] * b
        values["torch_peak_allocated_bytes"] = int(used)
        values["torch_peak_reserved_bytes"] = int(used * 1.1)
        # NVML counts the point's process (the allocator's reserve and a CUDA context), and,
        # device-wide, every process on the card: gpubench's parent held PARENT_HELD there
        values["nvml_process_peak_used_bytes"] = int(used * 1.1 + 500 * 2**20)
        values["nvml_peak_used_bytes"] = values["nvml_process_peak_used_bytes"] + PARENT_HELD
    values.update(extra)
    return make_row(point, "ok", **values)


def why_values(step_s: float, floor_s: float, work_s: float, flops: float) -> dict[str, Any]:
    """Issue 15's evidence for a synthetic row: the device is busy for the per-sample work plus
    a tenth of the floor; the busy time splits 60/30/10 into matmul, elementwise, optimizer."""
    busy = min(step_s, work_s + 0.1 * floor_s)
    cats = {"matmul": 0.6 * busy, "elementwise": 0.3 * busy, "optimizer": 0.1 * busy}
    nbytes = flops / 20  # 20 FLOP per byte
    return {
        "profile": {
            "steps": 2,
            "device": "x",
            "step_time_s": step_s,
            "busy_s": busy,
            "dispatch_s": None,
            "category_s": cats,
            "top_ops": [],
        },
        "busy_fraction": busy / step_s,
        "bytes_per_step": int(nbytes),
        "intensity_flop_per_byte": flops / nbytes,
        "achieved_gb_per_s": nbytes / step_s / 1e9,
        "peak_tflops": 1e5,  # the fixture's FLOP counts are large: the roof is made to match
        "peak_bandwidth_gb_per_s": 2e6,  # ridge point 50 FLOP per byte
    }


def write_run(
    path: Path, rows: list[dict[str, Any]], env_obj: dict[str, Any], **files: Any
) -> Path:
    store = ResultStore(path)
    for row in rows:
        store.append(row)
    store.write_json("env.json", env_obj)
    for name, obj in files.items():
        store.write_json(f"{name}.json", obj)
    return path


def cpu_gpu_runs(root: Path, model: str = "mlp") -> tuple[Path, Path]:
    """A CPU run and a GPU run of the same points, the GPU one with memory, MFU, energy and an
    OOM boundary at B=4096."""
    rng = np.random.default_rng(0)
    batches = (16, 64, 256, 1024, 4096)
    cpu_rows, gpu_rows = [], []
    for prec in ("fp32", "bf16"):
        for b in batches:
            cpu_rows.append(
                speed_row(Point(model, "small", "cpu", prec, "adamw", b), 2e-3, 1e-4, rng)
            )
            gpu_rows.append(
                speed_row(
                    Point(model, "small", "cuda", prec, "adamw", b),
                    3e-4,
                    2e-7 if prec == "bf16" else 5e-7,
                    rng,
                    memory=(2 * GiB, 10e6 if prec == "bf16" else 20e6),
                    capacity=H100["memory_bytes"],
                    mfu=0.1 * b / (b + 256),
                    energy_j_per_step=0.05 + 1e-4 * b,
                    avg_power_w=300.0,
                )
            )
    cpu = write_run(root / "cpu", cpu_rows, env(threads=2), suite={"name": "quick"})
    gpu = write_run(root / "gpu", gpu_rows, env([H100]), suite={"name": "gpu"})
    return cpu, gpu


def convergence_run(root: Path) -> Path:
    """Convergence rows with loss curves and time-to-target, plus a batch_analysis.json."""
    rng = np.random.default_rng(1)
    rows = []
    for b in (8, 32, 128):
        point = Point("mlp", "tiny", "cpu", "fp32", "sgd", b)
        steps = np.arange(0, 200, 20)
        time_per_step = 1e-3 + 2e-5 * b
        curve = [
            {
                "step": int(s),
                "samples": int(s * b),
                "time_s": float(s * time_per_step),
                "train_loss": float(2.3 * np.exp(-s * b / 3000) + 0.1 + rng.normal(0, 0.01)),
                "eval_loss": float(2.3 * np.exp(-s * b / 3500) + 0.15) if s % 40 == 0 else None,
            }
            for s in steps
        ]
        row = speed_row(
            point,
            1e-3,
            2e-5,
            rng,
            eval_loss=curve[-1]["train_loss"] + 0.05,
            steps_to_target=int(3000 / b * 2) + 10,
            time_to_target_s=(int(3000 / b * 2) + 10) * time_per_step,
        )
        row["curve"] = curve
        # issue 51: the noise scale the convergence path measures (the predicted chart's data)
        b_noise = 60.0 + b / 8
        row.update(
            noise_scale_b_noise=b_noise,
            noise_scale_b_noise_low=b_noise / 2,
            noise_scale_b_noise_high=b_noise * 2,
            noise_scale_first_step=20,
            noise_scale_last_step=180,
        )
        rows.append(row)
    analysis = {
        "groups": [
            {
                "model": "mlp",
                "precision": "fp32",
                "optimizer": "sgd",
                "device": "cpu",
                "s_min": 40.0,
                "b_crit": 60.0,
                "recommended_batch_size": 128,
            }
        ]
    }
    return write_run(root / "conv", rows, env(), batch_analysis=analysis)


def dump(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj))
