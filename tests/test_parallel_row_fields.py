"""A parallel point's row carries the memory, NVML and energy columns a single process's row
carries (null where the device has none), so the report's memory and energy views keep it."""

from __future__ import annotations

import pytest
import torch

from gpubench.config.spec import Budget, Point
from gpubench.harness import parallel_probes
from gpubench.harness.point import measure_point
from gpubench.run.ranks import run_parallel_point
from gpubench.store.row import COLUMNS

BUDGET = Budget.fixed(3, warmup_steps=1)
# What a row says about memory, the GPU's NVML readings and energy.
PREFIXES = ("torch_peak_", "nvml_", "host_", "energy_", "cpu_energy", "cpu_samples_per_j")
PREFIXES += ("memory_", "avg_power_w", "gpu_util_pct", "sm_clock_mhz", "temperature_c")
PREFIXES += ("throttle_reasons", "samples_per_j")
# Counted by the saved-tensor hooks of a single process's observed step; a rank's counted step
# runs no such hooks yet (FSDP's gathered parameters would read as activations there).
NOT_COUNTED_BY_RANKS = {"memory_activations_bytes"}
FIELDS = [c for c in COLUMNS if c.startswith(PREFIXES) and c not in NOT_COUNTED_BY_RANKS]


def _known(row: dict[str, object]) -> set[str]:
    return {c for c in FIELDS if row.get(c) is not None}


def _point(device: str, parallel: str = "none", nproc: int = 1) -> Point:
    return Point("mlp", "tiny", device, "fp32", "adamw", 4, parallel=parallel, nproc=nproc)


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_a_cpu_parallel_row_has_the_memory_and_energy_fields_of_a_single_row(
    parallel: str,
) -> None:
    single = measure_point(_point("cpu"), BUDGET)
    group = run_parallel_point(_point("cpu", parallel, 2), BUDGET, timeout_s=120)
    assert single["status"] == group["status"] == "ok", (single["error"], group["error"])
    assert _known(group) == _known(single)
    assert {"host_peak_address_space_bytes", "host_address_space_start_bytes"} <= _known(group)
    assert group["host_peak_address_space_bytes"] > group["host_address_space_start_bytes"]
    # nothing that a CPU cannot measure is filled in
    assert group["torch_peak_reserved_bytes"] is None and group["nvml_peak_used_bytes"] is None


def _gpu(energy: float | None, power: float, used: int, util: float) -> dict[str, object]:
    return {
        "nvml_peak_used_bytes": used,
        "energy_j_per_step": energy,
        "samples_per_j": None if energy is None else 8 / energy,
        "avg_power_w": power,
        "gpu_util_pct": util,
        "energy_method": "counter",
        "energy_note": None if energy is not None else "too coarse",
    }


def test_a_groups_gpus_add_their_energy_and_power_and_keep_the_worst_memory() -> None:
    two = parallel_probes.group_nvml([_gpu(2.0, 300.0, 5, 90.0), _gpu(3.0, 400.0, 7, 70.0)], 16)
    assert two["energy_j_per_step"] == 5.0 and two["samples_per_j"] == 16 / 5.0
    assert two["avg_power_w"] == 700.0 and two["gpu_util_pct"] == 80.0
    assert two["nvml_peak_used_bytes"] == 7 and two["energy_method"] == "counter"
    # one GPU without energy: the group's is unknown, and the note says why
    part = parallel_probes.group_nvml([_gpu(2.0, 300.0, 5, 90.0), _gpu(None, 400.0, 7, 70.0)], 16)
    assert part["energy_j_per_step"] is None and part["samples_per_j"] is None
    assert part["energy_note"] == "too coarse"
    # one rank: its own columns; no rank read NVML (the CPU): none
    assert parallel_probes.group_nvml([_gpu(2.0, 300.0, 5, 90.0)], 8) == _gpu(2.0, 300.0, 5, 90.0)
    assert parallel_probes.group_nvml([{}, {}], 16) == {}


@pytest.mark.gpu
@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_a_cuda_parallel_row_has_the_memory_nvml_and_energy_fields_of_a_single_row(
    parallel: str,
) -> None:
    budget = Budget.fixed(200, warmup_steps=2)
    single = measure_point(_point("cuda"), budget)
    group = run_parallel_point(
        _point("cuda", parallel, torch.cuda.device_count()), budget, timeout_s=300
    )
    assert single["status"] == group["status"] == "ok", (single["error"], group["error"])
    assert {"torch_peak_reserved_bytes", "nvml_peak_used_bytes", "avg_power_w"} <= _known(group)
    # energy where the single process has it (a window too short for the counter has none)
    assert _known(group) >= _known(single) - {"energy_j_per_step", "samples_per_j"}
