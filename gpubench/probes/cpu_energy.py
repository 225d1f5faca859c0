"""The CPU's energy over a point's measured window, wherever it can be had (issue 32): RAPL's
package (and DRAM) counters where the powercap interface is readable, else the TDP estimate of
probes.cpu_power, in columns of its own. `cpu_energy_method` names which (`rapl`,
`tdp_estimate`); a row never holds the estimate under a measurement's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench.probes import calibration, cpu_power, rapl
from gpubench.probes.probe import Probe


class CpuEnergy(Probe):
    """RAPL over the block, and the process's CPU time for the estimate where RAPL is missing
    (`estimate`: False, no estimate)."""

    def __init__(self, root: Path = rapl.POWERCAP, estimate: bool = True) -> None:
        self.package = rapl.PackageEnergy(root)
        self.rapl_reason = rapl.unavailable_reason(root)
        self.cpu_time = cpu_power.ProcessCpuTime() if estimate else None

    def start(self) -> None:
        self.package.start()
        if self.cpu_time is not None:
            self.cpu_time.start()

    def stop(self, failed: bool = False) -> None:
        if self.cpu_time is not None:
            self.cpu_time.stop(failed)
        self.package.stop(failed)

    def columns(
        self,
        steps: int,
        batch_size: int,
        cpu_model: str | None = None,
        cpu_s: float | None = None,
    ) -> dict[str, Any]:
        """The row's CPU energy columns for `steps` steps of `batch_size` samples: RAPL's
        where it read, else the estimate for `cpu_model` (None: this machine's CPU) from
        `cpu_s` CPU seconds over the block (None: this process's; a parallel point gives its
        ranks' sum), else {} or the note saying why RAPL's reading is null."""
        p = self.package
        if p.joules is not None:
            per_step = p.joules / steps
            return dict(
                cpu_energy_method="rapl",
                cpu_energy_j_per_step=per_step,
                cpu_samples_per_j=batch_size / per_step if per_step > 0 else None,
                cpu_dram_energy_j_per_step=None if p.dram_joules is None else p.dram_joules / steps,
            )
        note = {} if p.note is None else {"cpu_energy_note": p.note}
        # A counter that wrapped past its known range is RAPL failing on a RAPL machine: the
        # estimate is for machines without it, not a stand-in for a lost reading.
        t = self.cpu_time
        if self.rapl_reason is None or t is None or t.cpu_s is None or not t.wall_s:
            return note
        tdp = cpu_power.tdp_for(calibration.cpu_model() if cpu_model is None else cpu_model)
        est = cpu_power.estimate(t.cpu_s if cpu_s is None else cpu_s, t.wall_s, tdp)
        per_step = est.joules / steps
        return dict(
            cpu_energy_method="tdp_estimate",
            cpu_energy_estimate_j_per_step=per_step,
            cpu_samples_per_j_estimate=batch_size / per_step if per_step > 0 else None,
            cpu_energy_estimate_error_rel=cpu_power.error_rel(),
            cpu_busy_cores=est.busy_cores,
            cpu_tdp_per_core_w=tdp.per_core_w,
            cpu_tdp_model=tdp.model or "default",
        )
