"""What NVML sampling yields: a Reading and a window's Summary (peaks, means, energy, throttle
reasons). Plain data and arithmetic, no pynvml.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Any

from gpubench.probes import energy

# NVML's clock-event (throttle) reason bits (nvml.h, nvmlClocksEventReason*).
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


@dataclass(frozen=True)
class Reading:
    """One sample of a device. `t_s` is time.perf_counter(); None where NVML cannot tell."""

    t_s: float
    used_bytes: int | None = None  # device-wide used memory
    process_used_bytes: int | None = None  # this process's memory on the device
    power_w: float | None = None
    energy_j: float | None = None  # the total-energy counter (joules since the driver loaded)
    util_pct: float | None = None
    sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    throttle_reasons: int | None = None  # bitmask of THROTTLE_REASONS


@dataclass(frozen=True)
class Summary:
    """What a window's readings add up to. Energy is from the method (probes.energy: the
    "counter" or the "power_integral") stating the smaller error bound (`energy_error_rel`);
    None where neither is within energy.MAX_STATED_ERROR_REL, with the reasons in
    `energy_note`. `sample_hz` is the rate achieved."""

    samples: int
    duration_s: float
    sample_hz: float | None
    peak_used_bytes: int | None
    peak_process_used_bytes: int | None
    energy_j: float | None
    energy_method: str | None
    avg_power_w: float | None
    util_pct: float | None
    sm_clock_mhz: float | None
    temperature_c: float | None  # the highest seen
    throttle_reasons: str | None  # names seen during the window, "none" when none
    energy_error_rel: float | None = None
    energy_note: str | None = None
    energy_counter_resolution_s: float | None = None


def summarise(readings: list[Reading]) -> Summary:
    """Summarise readings taken in time order (the first at the window's start, the last at
    its end)."""
    if not readings:
        raise ValueError("no NVML readings to summarise")
    t = [r.t_s for r in readings]
    duration = t[-1] - t[0]
    gaps = len(readings) - 1
    power = [(r.t_s, r.power_w) for r in readings if r.power_w is not None]
    power_span = power[-1][0] - power[0][0] if len(power) >= 2 else 0.0
    counted = [(r.t_s, r.energy_j) for r in readings if r.energy_j is not None]
    counter = None
    if len(counted) == len(readings) and len(readings) >= 2:
        # a bound over 2% is weighed against the power integral's, not refused outright
        counter = energy.from_counter(
            [c[0] for c in counted],
            [c[1] for c in counted],
            max_error_rel=energy.MAX_STATED_ERROR_REL,
        )
    joules, method, error, notes = _energy(counter, power)
    masks = [r.throttle_reasons for r in readings if r.throttle_reasons is not None]
    return Summary(
        samples=len(readings),
        duration_s=duration,
        sample_hz=gaps / duration if duration > 0 and gaps > 0 else None,
        peak_used_bytes=_max([r.used_bytes for r in readings]),
        peak_process_used_bytes=_max([r.process_used_bytes for r in readings]),
        energy_j=joules,
        energy_method=method,
        avg_power_w=energy.trapezoid([t for t, _ in power], [w for _, w in power]) / power_span
        if power_span > 0
        else None,
        util_pct=_mean([r.util_pct for r in readings]),
        sm_clock_mhz=_mean([r.sm_clock_mhz for r in readings]),
        temperature_c=_max([r.temperature_c for r in readings]),
        throttle_reasons=throttle_names(functools.reduce(operator.or_, masks)) if masks else None,
        energy_error_rel=error,
        energy_note="; ".join(notes) if joules is None and notes else None,
        energy_counter_resolution_s=None if counter is None else counter.resolution_s,
    )


def _energy(
    counter: energy.Energy | None, power: list[tuple[float, float]]
) -> tuple[float | None, str | None, float | None, list[str]]:
    """The window's energy, its method and error bound, by Summary's rule; and why the
    methods that gave no figure gave none."""
    found: list[tuple[float, str, float]] = []  # (bound, method, joules)
    notes = []
    integral = energy.from_power([p[0] for p in power], [p[1] for p in power]) if power else None
    for method, got in (("counter", counter), ("power_integral", integral)):
        if got is not None and got.energy_j is not None and got.error_rel is not None:
            found.append((got.error_rel, method, got.energy_j))
        elif got is not None and got.note is not None:
            notes.append(got.note)
    if not found:
        return None, None, None, notes
    bound, method, joules = min(found)  # the smaller bound; the counter on a tie ("c" < "p")
    return joules, method, bound, notes


def throttle_names(mask: int) -> str:
    """Comma-separated names of the reasons in `mask`; "none" for 0."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    if unknown:
        names.append(f"0x{unknown:x}")
    return ",".join(names) if names else "none"


def _max(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None
