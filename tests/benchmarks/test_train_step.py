"""One training step of each reference workload, benchmarked with the sweep's harness.

`python -m pytest` runs these once each as tests (addopts has --benchmark-disable); the README's
"Benchmarks in CI" section has the command that times them for real and gates on a baseline.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest

from gpubench.config.spec import Budget
from gpubench.models import MODEL_NAMES, transformer
from gpubench.models.workload import Workload

CPU_BATCH_SIZES = (4, 16)
GPU_BATCH_SIZES = (8, 32)
GPU_PRECISIONS = ("fp32", "tf32", "bf16")
OPTIMIZERS = ("sgd", "adamw")

# (size, precision) on the CPU. bf16 on a CPU without bf16 instructions (this project's CI
# machine) is emulated and 5-20x slower than fp32, so it runs at the tiny size only, which keeps
# the quick form of this suite within seconds and a real run within a few minutes.
CPU_SIZE_PRECISIONS = (("tiny", "fp32"), ("tiny", "bf16"), ("small", "fp32"))
CPU_CASES = [
    pytest.param(m, s, b, p, o, id=f"{m}-{s}-{b}-{p}-{o}")
    for m, (s, p), b, o in itertools.product(
        MODEL_NAMES, CPU_SIZE_PRECISIONS, CPU_BATCH_SIZES, OPTIMIZERS
    )
]


def _check(row: dict, model: str, batch_size: int) -> None:
    assert row["model"] == model and row["batch_size"] == batch_size
    assert row["steps_measured"] == len(row["step_times_s"]) >= 1
    assert all(t > 0 for t in row["step_times_s"])
    assert math.isclose(row["samples_per_s"], batch_size / row["step_time_s"])
    assert (row["tokens_per_s"] is None) == (model != "transformer")
    assert math.isfinite(row["loss_last"])


def _counted_flops(model: str, size: str, workload: Workload, batch_size: int) -> int | None:
    """The FLOPs the counter finds in one step: the model's (the analytic count: 3x the forward's
    matmuls), plus, for the Transformer, the score matrix Q K^T that a fused attention kernel
    (flash, memory-efficient or cuDNN on CUDA, flash on the CPU) keeps no copy of and recomputes
    in its backward: 2*T*T*d per layer and sample, work the device did that the model does not
    need (so MFU leaves it out). None where the model has no analytic count."""
    if workload.flops_per_sample is None:
        return None
    analytic = int(workload.flops_per_sample) * batch_size
    if model != "transformer":
        return analytic
    cfg = transformer.PRESETS[size]
    return analytic + 2 * cfg.seq_len * cfg.seq_len * cfg.width * cfg.layers * batch_size


@pytest.mark.parametrize(("model", "size", "batch_size", "precision", "optimizer"), CPU_CASES)
def test_cpu_step(
    gpubench,
    reference_workload: Callable[[str, str], Workload],
    model: str,
    size: str,
    batch_size: int,
    precision: str,
    optimizer: str,
    bench_budget: Budget | None,
) -> None:
    workload = reference_workload(model, size)
    row = gpubench(
        workload,
        batch_size,
        precision=precision,
        optimizer=optimizer,
        device="cpu",
        model_size=size,
        budget=bench_budget,
    )
    _check(row, model, batch_size)
    assert row["torch_peak_allocated_bytes"] is None  # the CPU has no allocator statistics
    assert row["flops_per_step"] == _counted_flops(model, size, workload, batch_size)


@pytest.mark.gpu
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("precision", GPU_PRECISIONS)
@pytest.mark.parametrize("batch_size", GPU_BATCH_SIZES)
@pytest.mark.parametrize("model", MODEL_NAMES)
def test_cuda_step(
    gpubench,
    reference_workload: Callable[[str, str], Workload],
    model: str,
    batch_size: int,
    precision: str,
    optimizer: str,
    bench_budget: Budget | None,
) -> None:
    workload = reference_workload(model, "base")
    row = gpubench(
        workload,
        batch_size,
        precision=precision,
        optimizer=optimizer,
        device="cuda",
        model_size="base",
        budget=bench_budget,
    )
    _check(row, model, batch_size)
    assert row["torch_peak_allocated_bytes"] > 0
    if workload.flops_per_sample is None:  # no analytic count for this model yet
        assert row["flops_per_step"] is None and row["tflops"] is None
    else:
        assert row["flops_per_step"] == _counted_flops(model, "base", workload, batch_size)
        assert row["tflops"] > 0
        # MFU divides the model's FLOPs, the analytic count (PaLM, nanoGPT), not the counter's
        model_tflops = workload.flops_per_sample * batch_size / row["step_time_s"] / 1e12
        sheet = row["datasheet_peak_tflops"]  # None for a GPU the datasheet table lacks
        assert row["mfu"] == (None if sheet is None else pytest.approx(model_tflops / sheet))
