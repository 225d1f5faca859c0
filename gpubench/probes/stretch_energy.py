"""Energy summed over a convergence run's training stretches (issue 32: joules to target), the
evaluations between them left out as their time is: the GPU's NVML total-energy counter read at
each stretch's ends and the CPU's RAPL packages over each stretch; null where the machine cannot
tell (a CPU row then takes the user's stated watts where given: run.cpu_watts).

The GPU counter moves about every 100 ms on an H100 (probes.energy), so each stretch's
difference can be off by up to one update at each end: a few percent of a stretch that trains
for seconds, more for short ones (docs/energy.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from gpubench.probes import nvml, rapl
from gpubench.probes.current_device import cuda_index


@dataclass
class Totals:
    """Energy so far over the stretches: GPU (NVML counter) and CPU (RAPL) joules; None where
    the machine cannot tell."""

    gpu_j: float | None
    cpu_j: float | None
    stretches: int


class StretchEnergy:
    """Call `start()` before and `stop()` after each training stretch; `totals` sums them."""

    def __init__(self, device: torch.device) -> None:
        self._gpu = _gpu_reader(device)
        self._cpu = rapl.PackageEnergy()  # a fresh one per stretch
        self._gpu_start: float | None = None
        self.totals = Totals(
            gpu_j=0.0 if self._gpu is not None else None,
            cpu_j=0.0 if rapl.unavailable_reason() is None else None,
            stretches=0,
        )

    def start(self) -> None:
        self._gpu_start = self._gpu.read().energy_j if self._gpu is not None else None
        self._cpu = rapl.PackageEnergy()
        self._cpu.start()

    def stop(self) -> None:
        t, cpu = self.totals, self._cpu
        cpu.stop()
        t.stretches += 1
        joules = cpu.joules
        t.cpu_j = None if joules is None or t.cpu_j is None else t.cpu_j + joules
        if self._gpu is not None:
            end = self._gpu.read().energy_j
            if end is None or self._gpu_start is None or t.gpu_j is None:
                t.gpu_j = None
            else:
                t.gpu_j += end - self._gpu_start

    def curve_entry(self) -> dict[str, float | None]:
        """The running totals a convergence curve entry carries (joules)."""
        return {"gpu_energy_j": self.totals.gpu_j, "cpu_energy_j": self.totals.cpu_j}


def _gpu_reader(device: torch.device) -> nvml.Device | None:
    """An NVML reader of `device` where it is a GPU whose driver has the energy counter."""
    if device.type != "cuda" or nvml.unavailable_reason() is not None:
        return None
    reader = nvml.Device(cuda_index(device))
    return reader if reader.energy_counter else None


def to_target(reached: dict[str, Any] | None) -> dict[str, Any]:
    """A convergence row's energy-to-target columns from the curve entry that first met the
    target (None: never met, so none), with the CPU's method named where RAPL measured it."""
    if reached is None:
        return {}
    cpu = reached.get("cpu_energy_j")
    return dict(
        energy_to_target_j=reached.get("gpu_energy_j"),
        cpu_energy_to_target_j=cpu,
        cpu_energy_method=None if cpu is None else "rapl",
    )
