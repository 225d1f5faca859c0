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

from gpubench.config.keys import identity_dict, same_key
from gpubench.science import leaders, standing
from gpubench.science.partition import answer, device_of, finite, label, norm
from gpubench.store.wording import number, plural, times


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
        text = f"fastest {self.fastest}, {number(self.samples_per_s)} samples/s"
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
    # like with like (issue 41): the largest batch both devices ran, and the fastest row of
    # each at it (None where they share no batch)
    at_batch: SameBatch | None = None

    def line(self) -> str:
        """'cuda x5.96 cpu: the fastest on each, cuda fp32 B=64 (10,534 samples/s) over cpu
        fp32 B=64 (1,766); x5.96 the same configuration on cpu; per configuration measured on
        both, x1.43 to x5.96 (6 configurations, the speedup chart's figures)', and which
        device's rows were all contended. Where the two fastest ran at different batches the
        line leads with the largest batch both ran, the fastest of each there named (like
        with like), then the two fastest, said to be at different batches."""
        f, s = self.faster, self.slower
        fastest = (
            f"{f.fastest} ({number(f.samples_per_s)} samples/s) over {s.fastest} "
            f"({number(s.samples_per_s)})"
        )
        b = self.at_batch
        if b is None or int(f.row["batch_size"]) == int(s.row["batch_size"]):
            text = f"{f.device} {times(self.ratio)} {s.device}: the fastest on each, {fastest}"
        else:
            text = (
                f"{f.device} {times(b.ratio)} {s.device} at B={b.batch_size}, the largest batch "
                f"both ran: the fastest of each there, {b.faster_label} "
                f"({number(b.faster_samples_per_s)} samples/s) over {b.slower_label} "
                f"({number(b.slower_samples_per_s)}); the fastest on each, at different batches, "
                f"{times(self.ratio)}: {fastest}"
            )
        if self.same is not None:
            text += f"; {times(self.same)} the same configuration on {s.device}"
        if self.low is not None and self.high is not None:
            text += (
                f"; per configuration measured on both, {times(self.low)} to {times(self.high)} "
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
            "same_batch": None if self.at_batch is None else self.at_batch.to_dict(),
            "text": self.line(),
        }


@dataclass(frozen=True)
class SameBatch:
    """The fastest row of each of two devices at one batch size both ran, and their ratio
    (the faster device's samples/s over the slower's)."""

    batch_size: int
    faster_label: str
    faster_samples_per_s: float
    slower_label: str
    slower_samples_per_s: float

    @property
    def ratio(self) -> float:
        return self.faster_samples_per_s / self.slower_samples_per_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "ratio": self.ratio,
            "faster": {"label": self.faster_label, "samples_per_s": self.faster_samples_per_s},
            "slower": {"label": self.slower_label, "samples_per_s": self.slower_samples_per_s},
        }


def same_batch(
    faster: str, slower: str, ok: list[dict[str, Any]], among: list[str] | None = None
) -> SameBatch | None:
    """The largest batch size at which both devices `faster` and `slower` have rows in `ok`,
    with the fastest row of each there (by its samples/s); None where they share none."""
    by_batch: dict[str, dict[int, dict[str, Any]]] = {faster: {}, slower: {}}
    for r in ok:
        found = by_batch.get(device_of(r))
        if found is None or not finite(r.get("samples_per_s")):
            continue
        b = int(r["batch_size"])
        if b not in found or float(r["samples_per_s"]) > float(found[b]["samples_per_s"]):
            found[b] = r
    common = set(by_batch[faster]) & set(by_batch[slower])
    if not common:
        return None
    b = max(common)
    f, s = by_batch[faster][b], by_batch[slower][b]
    names = among or []
    return SameBatch(
        b, label(f, names), float(f["samples_per_s"]), label(s, names), float(s["samples_per_s"])
    )


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
        same_batch(faster.device, slower.device, ok),
    )


def _median_steps(ok: list[dict[str, Any]]) -> dict[str, dict[tuple[Any, ...], float]]:
    """Per device, per configuration (the identity but the device), the median step time of its
    rows (several seeds or runs of one configuration: the speedup chart takes the median)."""
    found: dict[str, dict[tuple[Any, ...], list[float]]] = {}
    for r in ok:
        key = same_key(r, "device")
        steps = found.setdefault(device_of(r), {})
        steps.setdefault(key, []).append(float(r["step_time_s"]))
    return {d: {k: statistics.median(v) for k, v in by_key.items()} for d, by_key in found.items()}


# How a row's device energy was measured (the row's `energy_method`), in words.
_METHODS = {"counter": "NVML energy counter", "power_integral": "NVML sampled power, integrated"}


def energy_lines(
    best: dict[str, Any], leads: list[DeviceLead], ok: list[dict[str, Any]], among: list[str]
) -> list[str]:
    """First the fastest configuration's samples per joule, or why its row has none; then the
    same for the fastest on each other device; then, per device, the most samples per joule any
    of its rows measured where that row is none of those, said as another row. `ok`: the
    partition's rows that ran. A CPU row with no energy figure and no note of its own says
    nothing here: the run says once why the CPU's energy was not measured (cpu_unmeasured)."""
    out = []
    named = []
    for which, row in [(f"the fastest ({label(best, among)})", best)] + [
        (f"the fastest on {d.device} ({d.fastest})", d.row) for d in leads
    ]:
        if standing.identity(row) in named:
            continue
        named.append(standing.identity(row))
        said = of(row)
        if said:
            out.append(f"{which}: {said}")
    for d in leads:  # issue 41: measured energy breaks a tie on speed
        tie = _tie_energy(d, ok, among)
        if tie is not None:
            out.append(tie[0])
            named.append(standing.identity(tie[1]))
    for device, rows in standing.by_device(ok).items():
        measured = [(per_j, r) for r in rows if (per_j := measured_samples_per_j(r)) is not None]
        if not measured:
            continue
        top_j, top = max(measured, key=lambda m: m[0])
        if standing.identity(top) not in named:
            out.append(
                f"most samples/J of any {device} row: {number(top_j)} "
                f"({label(top, among)}, {_method(top)}; not the fastest on {device})"
            )
    return out


def _tie_energy(
    lead: DeviceLead, ok: list[dict[str, Any]], among: list[str]
) -> tuple[str, dict[str, Any]] | None:
    """Where the fastest on a device is tied with other configurations and two or more of
    them have measured energy: the line naming the one that trains the most samples per
    joule, against the others' figures (issue 41: measured energy breaks a tie on speed), and
    its row; else None."""
    if not lead.ties:
        return None
    tied = {standing.identity(t["identity"]) for t in lead.ties}
    rows = [lead.row] + [r for r in ok if standing.identity(r) in tied]
    measured = sorted(
        ((per_j, r) for r in rows if (per_j := measured_samples_per_j(r)) is not None),
        key=lambda m: -m[0],
    )
    if len(measured) < 2:
        return None
    (top_j, top), rest = measured[0], measured[1:]
    others = ", ".join(f"{number(per_j)} ({label(r, among)})" for per_j, r in rest)
    return (
        f"tied on speed on {lead.device}, {label(top, among)} trains the most per joule: "
        f"{number(top_j)} samples/J ({_method(top)}) against {others}"
    ), top


def of(row: dict[str, Any]) -> str:
    """One row's samples per joule and how it was had, or why there is none: on the CPU the
    RAPL package's, or the user's stated watts' (said as stated), or the note saying why RAPL's
    reading is null ("" where the CPU simply had none: said once per run, cpu_unmeasured); on a
    GPU the device's (NVML)."""
    if row["device"] == "cpu":
        if finite(row.get("cpu_samples_per_j")):
            return f"{number(float(row['cpu_samples_per_j']))} samples/J ({_method(row)})"
        note = norm(row.get("cpu_energy_note"))
        return f"no CPU energy figure ({note})" if note else ""
    if finite(row.get("samples_per_j")):
        return f"{number(float(row['samples_per_j']))} samples/J ({_method(row)})"
    note = row.get("energy_note")
    if isinstance(note, str) and note:
        return f"no energy figure ({note})"
    if not any(finite(row.get(k)) for k in ("avg_power_w", "nvml_peak_used_bytes")):
        return "no energy figure (no NVML reading in its row)"
    return "no energy figure (its row has no NVML energy reading)"


def cpu_unmeasured(rows: list[dict[str, Any]], reason: str | None) -> str | None:
    """The one line a run's verdict says where a CPU row that ran has no energy figure and no
    note of its own: not measured, why (`reason`: why RAPL cannot be read, from env.json; None:
    not known), and how to state it; None where every CPU row has a figure or a note."""
    if not any(
        r.get("device") == "cpu"
        and standing.ran(r)
        and not finite(r.get("cpu_samples_per_j"))
        and not norm(r.get("cpu_energy_note"))
        for r in rows
    ):
        return None
    why = f"RAPL could not be read: {reason}" if reason else "no RAPL reading in its rows"
    return f"CPU energy: not measured ({why}); give sweep --cpu-watts W to state the CPU's power"


def measured_samples_per_j(row: dict[str, Any]) -> float | None:
    """The row's measured samples per joule on its training device: NVML on a GPU, the RAPL
    package on the CPU; None where it was not measured (the user's stated watts are no
    measurement: at one power for every row they rank configurations as speed does, so they
    never break a tie)."""
    column = "cpu_samples_per_j" if row.get("device") == "cpu" else "samples_per_j"
    if row.get("device") == "cpu" and row.get("cpu_energy_method") == "stated":
        return None
    if not finite(row.get(column)) or float(row[column]) <= 0:
        return None
    return float(row[column])


def _method(row: dict[str, Any]) -> str:
    if row["device"] == "cpu" and row.get("cpu_energy_method") == "stated":
        return f"stated: {number(float(row['cpu_watts']))} W (--cpu-watts) x its step time"
    if row["device"] == "cpu":
        return "RAPL package"
    method = row.get("energy_method")
    return _METHODS.get(str(method), f"NVML, {method}" if method else "NVML")
