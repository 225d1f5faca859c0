"""A CPU row's energy from the power the user states (issue 49: `sweep --cpu-watts W`, or a
suite's `cpu_watts`) where RAPL did not measure it: W x the row's measured time. Added by the
sweep's parent to each row it stores, as the cost columns are (run.cost). The figure is the
user's, said as stated (`cpu_energy_method = stated`, `cpu_watts`), never a measurement: at one
power for every configuration it ranks them as their speed does, so it breaks no tie
(science.devices.measured_samples_per_j)."""

from __future__ import annotations

from typing import Any

from gpubench.science.partition import finite
from gpubench.science.standing import positive

METHOD = "stated"


def columns(row: dict[str, Any], watts: float | None) -> dict[str, Any]:
    """The CPU energy columns of `row` at `watts` (None: none given): energy per step at its
    median step time, samples per joule at its samples_per_s, and a convergence row's joules
    to target at its time_to_target_s, each None where its time is; {} where `watts` is None,
    the row is not the CPU's, RAPL measured it, or it has no measured time."""
    if watts is None or row.get("device") != "cpu" or row.get("cpu_energy_method") == "rapl":
        return {}
    step, rate, reached = (row.get(k) for k in ("step_time_s", "samples_per_s", "time_to_target_s"))
    if positive(step) is None and not finite(reached):
        return {}
    return dict(
        cpu_energy_method=METHOD,
        cpu_watts=watts,
        cpu_energy_j_per_step=watts * step if positive(step) else None,
        cpu_samples_per_j=rate / watts if positive(rate) else None,
        cpu_energy_to_target_j=watts * reached if finite(reached) else None,
    )
