"""A verdict over several devices answers per device, then across them (DESIGN section 4): the
fastest configuration on each device, judged among that device's rows alone (science.standing:
a filter on rows never decides between devices), and how much faster the fastest device is than
each other one: leader against leader, at the leader's own configuration, and over every
configuration measured on both (the figures of the report's speedup chart). And the
energy lines: what the answer's own configuration, and each device's fastest, costs in energy,
or why its row has no figure; never another row's figure under the winner's name.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from gpubench.science import leaders, standing
from gpubench.science.partition import answer, finite, identity_dict, label, norm, same_key
from gpubench.store.wording import plural


@dataclass
class DeviceLead:
    """The fastest configuration on one device (the leader of a tie among its rows), the rows
    it could not be told from, how sure, the counts of its rows that ran (`rows`, `busy`,
    `noisy`, `clean`), and `contended`: every one of its rows was busy, so all were kept."""

    device: str
    fastest: str
    samples_per_s: float
    identity: dict[str, Any]
    ties: list[dict[str, Any]]
    confidence: str
    counts: dict[str, int]
    row: dict[str, Any] = field(repr=False)

    @property
    def contended(self) -> bool:
        return self.counts["rows"] > 0 and self.counts["busy"] == self.counts["rows"]

    def headline(self) -> str:
        """'fastest cuda fp32 B=64, 10,534 samples/s' (or the tie, named with its leader)."""
        notes = [f"tied with {', '.join(t['label'] for t in self.ties)}"] if self.ties else []
        if self.contended:
            notes.append(f"every one of its {plural(self.counts['rows'], 'row')} contended, kept")
        text = f"fastest {self.fastest}, {self.samples_per_s:,.0f} samples/s"
        return text + (f" ({'; '.join(notes)})" if notes else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            **answer(self.fastest, self.samples_per_s, self.identity, self.ties),
            "confidence": self.confidence,
            "rows": self.counts,
            "contended": self.contended,
        }


def device_leads(
    ok: list[dict[str, Any]],
    confirmation: dict[str, Any] | None,
    among: list[str],
    first: str | None = None,
    margin: float = leaders.MARGIN,
) -> list[DeviceLead]:
    """Per device of `ok` (one partition's rows that ran), its lead: the device `first` (the
    verdict's answer's) first, then the others fastest first. A device whose rows were all
    contended keeps them (standing.pool)."""
    out = []
    for device, rows in standing.by_device(ok).items():
        lead = standing.lead(standing.pool(rows), confirmation, among, margin)
        best = lead.best
        out.append(
            DeviceLead(
                device,
                label(best, among),
                float(best["samples_per_s"]),
                identity_dict(best),
                lead.ties,
                lead.confidence,
                standing.device_counts(rows),
                best,
            )
        )
    return sorted(out, key=lambda d: (d.device != first, -d.samples_per_s))


@dataclass(frozen=True)
class Across:
    """How much faster the device `faster` (the verdict's answer's: the faster unless interleaved
    rounds ranked otherwise) is than `slower`: `ratio`, its fastest configuration's
    samples/s over the slower's fastest; `same`, over the same configuration on the slower device
    (step time over step time; None where that was not measured); `low`/`high` over the
    `configurations` measured on both (each configuration's median step time, as the speedup
    chart takes it; None where none was)."""

    faster: DeviceLead
    slower: DeviceLead
    ratio: float
    same: float | None
    low: float | None
    high: float | None
    configurations: int

    def line(self) -> str:
        """'cuda 5.96x cpu: the fastest on each, cuda fp32 B=64 (10,534 samples/s) over cpu
        fp32 B=64 (1,766); 5.96x the same configuration on cpu; per configuration measured on
        both, 1.43x to 5.96x (6 configurations, the speedup chart's figures)', and which
        device's rows were all contended."""
        f, s = self.faster, self.slower
        text = (
            f"{f.device} {self.ratio:,.2f}x {s.device}: the fastest on each, {f.fastest} "
            f"({f.samples_per_s:,.0f} samples/s) over {s.fastest} ({s.samples_per_s:,.0f})"
        )
        if self.same is not None:
            text += f"; {self.same:,.2f}x the same configuration on {s.device}"
        if self.low is not None and self.high is not None:
            text += (
                f"; per configuration measured on both, {self.low:,.2f}x to {self.high:,.2f}x "
                f"({plural(self.configurations, 'configuration')}, the speedup chart's figures)"
            )
        if s.contended or f.contended:
            which = " and ".join(d.device for d in (f, s) if d.contended)
            text += f"; every {which} row was contended (busy), compared all the same"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "faster": self.faster.device,
            "slower": self.slower.device,
            "ratio": self.ratio,
            "same_configuration_ratio": self.same,
            "per_configuration_low": self.low,
            "per_configuration_high": self.high,
            "configurations": self.configurations,
            "text": self.line(),
        }


def across(leads: list[DeviceLead], ok: list[dict[str, Any]]) -> list[Across]:
    """The first device of `leads` (the answer's, as device_leads orders them) against each
    other device; [] with one device. `ok`: the partition's rows that ran, every one (busy ones
    too: the speedup chart shows them all)."""
    if len(leads) < 2:
        return []
    top = leads[0]
    return [_against(top, other, ok) for other in leads[1:]]


def _against(faster: DeviceLead, slower: DeviceLead, ok: list[dict[str, Any]]) -> Across:
    steps = _median_steps(ok)
    ratios = []
    for key, on_faster in steps.get(faster.device, {}).items():
        on_slower = steps.get(slower.device, {}).get(key)
        if on_slower is not None:
            ratios.append(on_slower / on_faster)
    leader = same_key(faster.row, "device")
    fast_step = steps[faster.device].get(leader)
    slow_step = steps.get(slower.device, {}).get(leader)
    return Across(
        faster,
        slower,
        faster.samples_per_s / slower.samples_per_s,
        None if fast_step is None or slow_step is None else slow_step / fast_step,
        min(ratios) if ratios else None,
        max(ratios) if ratios else None,
        len(ratios),
    )


def _median_steps(ok: list[dict[str, Any]]) -> dict[str, dict[tuple[Any, ...], float]]:
    """Per device, per configuration (the identity but the device), the median step time of its
    rows (several seeds or runs of one configuration: the speedup chart takes the median)."""
    found: dict[str, dict[tuple[Any, ...], list[float]]] = {}
    for r in ok:
        key = same_key(r, "device")
        found.setdefault(str(r["device"]), {}).setdefault(key, []).append(float(r["step_time_s"]))
    return {d: {k: statistics.median(v) for k, v in by_key.items()} for d, by_key in found.items()}


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
        return f"CPU not measured ({why}){estimated(row)}"
    if finite(row.get("samples_per_j")):
        return f"{float(row['samples_per_j']):,.1f} samples/J ({_method(row)})"
    note = row.get("energy_note")
    if isinstance(note, str) and note:
        return f"no energy figure ({note})"
    if not any(finite(row.get(k)) for k in ("avg_power_w", "nvml_peak_used_bytes")):
        return "no energy figure (no NVML reading in its row)"
    return "no energy figure (its row has no NVML energy reading)"


def estimated(row: dict[str, Any]) -> str:
    """ "; estimated ..." with a row's TDP estimate of samples per joule and its stated error
    (issue 32), or "" where the row has none."""
    if not finite(row.get("cpu_samples_per_j_estimate")):
        return ""
    value = float(row["cpu_samples_per_j_estimate"])
    error = row.get("cpu_energy_estimate_error_rel")
    bound = (
        f", error up to {float(row['cpu_energy_estimate_error_rel']):.0%}" if finite(error) else ""
    )
    return f"; estimated {value:,.1f} samples/J from the CPU's TDP{bound}, not measured"


def _method(row: dict[str, Any]) -> str:
    if row["device"] == "cpu":
        return "RAPL package"
    method = row.get("energy_method")
    return _METHODS.get(str(method), f"NVML, {method}" if method else "NVML")
