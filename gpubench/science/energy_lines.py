"""The verdict's energy lines: what the answer's own configuration costs in energy, or why its
row has no figure; never another row's figure under the winner's name (issue 28: "GPU 20.5
samples/J (cuda fp32 B=16)" was printed under a winner at B=64 that had none)."""

from __future__ import annotations

from typing import Any

from gpubench.science import standing
from gpubench.science.devices import DeviceLead
from gpubench.science.partition import finite, label, norm

# How a row's device energy was measured (the row's `energy_method`), in words.
_METHODS = {"counter": "NVML energy counter", "power_integral": "NVML sampled power, integrated"}


def energy_lines(
    best: dict[str, Any],
    leads: list[DeviceLead],
    ok: list[dict[str, Any]],
    cpu_reason: str | None,
    among: list[str],
) -> list[str]:
    """First the fastest configuration's samples per joule, or why its row has none; then the
    same for the fastest on each other device; then, per device, the most samples per joule any
    of its rows measured where that row is none of those, said as another row. `ok`: the
    partition's rows that ran; `cpu_reason`: why the run had no CPU package energy (env.json)."""
    out = [f"the fastest ({label(best, among)}): {of(best, cpu_reason)}"]
    named = [standing.identity(best)]
    for d in leads:
        if standing.identity(d.row) not in named:
            named.append(standing.identity(d.row))
            out.append(f"the fastest on {d.device} ({d.fastest}): {of(d.row, cpu_reason)}")
    for device, rows in standing.by_device(ok).items():
        column = "cpu_samples_per_j" if device == "cpu" else "samples_per_j"
        measured = [r for r in rows if finite(r.get(column))]
        if not measured:
            continue
        top = max(measured, key=lambda r: float(r[column]))
        if standing.identity(top) not in named:
            out.append(
                f"most samples/J of any {device} row: {float(top[column]):,.1f} "
                f"({label(top, among)}, {_method(top)}; not the fastest on {device})"
            )
    return out


def of(row: dict[str, Any], cpu_reason: str | None = None) -> str:
    """One row's samples per joule and how it was measured, or why there is none: on the CPU
    the RAPL package's, on a GPU the device's (NVML)."""
    if row["device"] == "cpu":
        if finite(row.get("cpu_samples_per_j")):
            return f"{float(row['cpu_samples_per_j']):,.1f} samples/J (RAPL package)"
        why = norm(row.get("cpu_energy_note")) or cpu_reason or "no RAPL reading in these rows"
        return f"CPU not measured ({why})"
    if finite(row.get("samples_per_j")):
        return f"{float(row['samples_per_j']):,.1f} samples/J ({_method(row)})"
    note = row.get("energy_note")
    if isinstance(note, str) and note:
        return f"no energy figure ({note})"
    if not any(finite(row.get(k)) for k in ("avg_power_w", "nvml_peak_used_bytes")):
        return "no energy figure (no NVML reading in its row)"
    return "no energy figure (its row has no NVML energy reading)"


def _method(row: dict[str, Any]) -> str:
    if row["device"] == "cpu":
        return "RAPL package"
    method = row.get("energy_method")
    return _METHODS.get(str(method), f"NVML, {method}" if method else "NVML")
