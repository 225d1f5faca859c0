"""Issue 21, item 5: workloads whose bottleneck is known by construction, measured through the
sweep's own path (harness.point.measure_workload: warm-up, windows, counters, profile) and
classified by science.bottleneck. The roofs come from the same calibrations a sweep runs at its
start. Sizes are chosen so each verdict stands far from every threshold, on a quiet machine as
on a busy one (a chain of elementwise ops has no FLOPs at all: its intensity is 0 whatever the
ridge; the products' intensity, about 40 FLOP/B, is 3x the ridge of a quiet 2-core machine)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from gpubench.config.spec import Budget, Point
from gpubench.data.files import CACHE_ENV
from gpubench.harness import timing
from gpubench.harness.point import measure_workload
from gpubench.harness.threads import intra_op_threads
from gpubench.models.workload import Workload
from gpubench.probes import bandwidth, calibration, load
from gpubench.science.bottleneck import (
    FLOP_SPREAD,
    INTENSITY_SPREAD,
    RIDGE_SPREAD,
    Bottleneck,
    classify,
    ridge,
)

# 12 measured steps after 3 warm-up steps: one profiled step stays under point.PROFILE_SHARE.
BUDGET = dataclasses.replace(Budget.fixed(steps=12, warmup_steps=3), profile_steps=1)


class ElementwiseChain(nn.Module):
    """A per-feature scale, then a chain of cheap elementwise ops over a wide tensor: every op
    reads and writes the whole tensor and computes almost nothing."""

    def __init__(self, width: int, links: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(width))
        self.links = links

    def forward(self, x: Tensor) -> Tensor:
        y = x * self.scale
        for _ in range(self.links):
            y = F.relu(y * 0.9 + 0.1)  # bounded however long the chain
        return y


def _workload(name: str, model: nn.Module, features: int) -> Workload:
    def make_batch(batch_size: int, device: torch.device, seed: int) -> tuple[Tensor, Tensor]:
        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(batch_size, features, generator=g, device=device)
        return x, torch.randn(batch_size, features, generator=g, device=device)

    return Workload(name, model, make_batch, F.mse_loss)


def _classified(workload: Workload, batch_size: int, device: str = "cpu") -> Bottleneck:
    return classify(_measured(workload, batch_size, device))  # type: ignore[return-value]


def _measured(workload: Workload, batch_size: int, device: str = "cpu") -> dict[str, Any]:
    """The verdict on `workload` measured as a sweep's point with one intra-op thread: on a
    busy machine a parallel operator waits for its slowest thread, and two threads make a step
    many times slower than the roofs calibrated a moment before (a memory-bound chain read as
    2.5% of the bandwidth roof with two threads, here, beside other work)."""
    point = Point(workload.name, "custom", device, "fp32", "sgd", batch_size, threads=1)
    with intra_op_threads(1):
        peak = calibration.matmul_peak(device, "fp32")
        bandwidth.memory_bandwidth(device)  # a sweep calibrates it at its start; a point reads it
        torch.manual_seed(0)
        values, _ = measure_workload(point, workload, BUDGET, peak, lr=1e-3)
    row = point.to_dict() | values
    assert row["status"] == "ok"
    assert classify(row) is not None, row.get("profile")
    return row


def test_a_chain_of_elementwise_ops_over_a_wide_tensor_is_memory_bound() -> None:
    chain = _workload("chain", ElementwiseChain(width=1 << 16, links=4), 1 << 16)
    row = _measured(chain, batch_size=4)
    # With the device counted busy for the whole step, the roofs decide: an intensity of 0.
    always_busy = row | {"profile": {**row["profile"], "busy_s": row["step_time_s"]}}
    by_roofs = classify(always_busy)
    assert by_roofs is not None and by_roofs.kind == "memory", by_roofs
    # As measured: other processes taking this point's core stretch its steps while the
    # profiler's self time stays, so "device busy 32%" read launch-bound at a load average of 7
    # here. The row says when it was contended (busy); then only the roofs' verdict stands.
    # (`busy` is the worker's, not measure_workload's: computed here by the worker's rule; an
    # unknown load, steps too short for its clock, cannot clear the point either.)
    verdict = classify(row)
    assert verdict is not None
    busy = load.contended(
        row["other_load_cores"], load.needed_cores(row["device"], 1), load.cores()
    )
    assert verdict.kind == "memory" or busy is not False, (
        verdict.evidence,
        row["other_load_cores"],
    )


def _cpu_seconds(device: torch.device, work: Callable[[], object], reps: int = 1) -> float:
    """calibration.device_seconds on this process's CPU clock (the CPU only)."""
    assert device.type == "cpu", device
    t0 = time.process_time()
    for _ in range(reps):
        work()
    return time.process_time() - t0


def test_large_square_matmuls_at_a_large_batch_are_compute_bound(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Judged on this process's CPU clock: the steps (harness.timing's clock) and both roofs,
    calibrated afresh in this test's own cache. On the wall clock the verdict read the load:
    the median step, slowed by other processes, against a roof from the session's cache (a
    best of three rounds, at another moment) read 32.5% of the roof, under BOUND_ROOF, with
    another process beside the suite; beside two other processes, wall-clock readings with a
    fresh roof ran 21-67% of it here, CPU-clock ones 62-86%. Seconds a process waits for a
    core are on neither CPU clock: the fraction measures the work, as the verdict means it
    (the sweep itself reads the wall clock and says when a point was contended). What the CPU
    clock does not remove (caches and memory shared with other processes) slows the roofs'
    products and the steps alike."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(timing, "_clock", time.process_time)
    monkeypatch.setattr(calibration, "device_seconds", _cpu_seconds)
    monkeypatch.setattr(bandwidth, "device_seconds", _cpu_seconds)
    calibration.clear_memo()  # the roofs of this clock, measured here, stay out of the memo
    try:
        n = 512
        products = nn.Sequential(nn.Linear(n, n, bias=False), nn.Linear(n, n, bias=False))
        row = _measured(_workload("products", products, n), batch_size=n)
    finally:
        calibration.clear_memo()
    assert row["peak_tflops"] > 0 and row["peak_bandwidth_gb_per_s"] > 0
    verdict = classify(row)
    assert verdict is not None and verdict.kind == "compute", verdict


def test_many_tiny_ops_on_the_cpu_are_overhead_bound() -> None:
    """On the CPU an operator's self time includes the dispatcher's cost, so the profile calls
    the host busy; the step is still far under both roofs (DESIGN.md 4): launch/host-bound."""
    tiny = _workload("tiny_chain", ElementwiseChain(width=16, links=50), 16)
    row = _measured(tiny, batch_size=1)
    verdict = classify(row)
    assert verdict is not None and verdict.kind == "launch", row.get("profile")
    # The profile may also see the host idle (the busy rule then speaks first); with the device
    # counted busy for the whole step, the roofs alone still say launch/host-bound.
    always_busy = row | {"profile": {**row["profile"], "busy_s": row["step_time_s"]}}
    by_roofs = classify(always_busy)
    assert by_roofs is not None and by_roofs.kind == "launch"
    assert "of the bandwidth roof" in by_roofs.evidence


@pytest.mark.gpu
def test_many_tiny_kernels_on_cuda_are_launch_bound() -> None:
    tiny = _workload("tiny_chain", ElementwiseChain(width=16, links=50), 16)
    verdict = _classified(tiny, batch_size=1, device="cuda")
    assert verdict.kind == "launch", verdict.evidence


# --- issue 28: real H100 rows near the ridge ---------------------------------------------------
# tests/data/h100/bottleneck_rows.jsonl: the ok CUDA rows of ../shared/fixtures/h100-20261124
# gpu-tf/ (transformer/base, each precision), effbatch/ (bf16 B=256 as 4 x 64) and ddp/
# (transformer bf16 B=64, ddp and fsdp at nproc 1), unchanged.


def _h100_rows() -> list[dict[str, Any]]:
    path = Path(__file__).parent / "data" / "h100" / "bottleneck_rows.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _bf16_micro_batch_64() -> list[dict[str, Any]]:
    return [
        r
        for r in _h100_rows()
        if r["precision"] == "bf16"
        and r["batch_size"] // r["accumulate"] == 64
        and r.get("parallel") in (None, "none")
    ]


def test_one_h100_operating_point_gets_one_class() -> None:
    rows = _bf16_micro_batch_64()
    assert len(rows) == 2  # B=64, and B=256 as 4 x 64, in two runs
    # as recorded by the rules before issue 28: one point, two classes
    assert {r["bottleneck"] for r in rows} == {"compute", "memory"}
    kinds = set()
    for r in rows:
        verdict = classify(r)
        assert verdict is not None
        kinds.add(verdict.kind)
    assert len(kinds) == 1, kinds


def test_the_ridge_margin_covers_the_spread_measured_on_the_h100() -> None:
    rows = _h100_rows()
    bf16 = [ridge(r) for r in rows if r["precision"] == "bf16"]
    assert len(bf16) >= 3 and all(x is not None for x in bf16)
    assert max(bf16) / min(bf16) - 1 <= RIDGE_SPREAD  # type: ignore[type-var, operator]
    counted = [r for r in rows if r.get("flops_analytic_per_step")]
    assert counted
    flops = max(abs(r["flops_per_step"] / r["flops_analytic_per_step"] - 1) for r in counted)
    assert flops <= FLOP_SPREAD + 1e-12
    intensity = [r["intensity_flop_per_byte"] for r in _bf16_micro_batch_64()]
    assert max(intensity) / min(intensity) - 1 <= INTENSITY_SPREAD
