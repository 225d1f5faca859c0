"""Energy and money beside time (issue 32): the configuration that reaches the target with the
least energy, and the cheapest per sample and to target, each named beside the fastest where
they differ. Pure functions of rows (their energy columns, and the cost columns the sweep adds
from --price: run.cost).

A convergence configuration's joules (or dollars) to target is the median over its seeds, and
it can be named only where every seed reached the target with a figure (as target_time names
the fastest). Its joules are its training device's: the GPU's (NVML) for a GPU row, the CPU's
(RAPL, or the user's --cpu-watts times its time, then said "stated") for a CPU row.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from gpubench.science import standing, target_time
from gpubench.science.partition import figure, finite, label
from gpubench.store.wording import dollars, number

Figure = Callable[[dict[str, Any]], float | None]


def joules_to_target(row: dict[str, Any]) -> float | None:
    """The training device's joules to target (module docstring), or None."""
    column = "cpu_energy_to_target_j" if row.get("device") == "cpu" else "energy_to_target_j"
    return figure(row.get(column))


def stated(row: dict[str, Any]) -> bool:
    """Whether the row's joules to target are the user's stated CPU watts (run.cpu_watts)."""
    return row.get("device") == "cpu" and row.get("cpu_energy_method") == "stated"


def usd_to_target(row: dict[str, Any]) -> float | None:
    """The row's dollars to target (run.cost, from --price), or None."""
    return figure(row.get("usd_to_target"))


def _median(s: target_time.TargetTime, of_row: Figure) -> float | None:
    """The configuration's median `of_row` over its seeds; None unless every seed reached the
    target with one."""
    if not s.complete:
        return None
    values = [of_row(r) for r in s.rows]
    if any(v is None for v in values):
        return None
    return statistics.median(v for v in values if v is not None)


def _least(
    summaries: list[target_time.TargetTime], of_row: Figure
) -> target_time.TargetTime | None:
    """The configuration with the least median `of_row` (ties: the smaller batch)."""
    found = [
        (m, s.batch_size, i)
        for i, s in enumerate(summaries)
        if (m := _median(s, of_row)) is not None
    ]
    return summaries[min(found)[2]] if found else None


def _joules(value: float) -> str:
    return f"{number(value, 3)} J"


def lines(
    best: dict[str, Any], ok: list[dict[str, Any]], all_rows: list[dict[str, Any]], among: list[str]
) -> list[str]:
    """The verdict's economy lines: to target (target_lines), then 'cheapest: ...'."""
    cheapest = cost_line(best, ok, among)
    return target_lines(all_rows) + ([f"cheapest: {cheapest}"] if cheapest else [])


def target_lines(records: list[dict[str, Any]]) -> list[str]:
    """'least energy to target: ...' and 'cheapest to target: ...', each with the fastest to
    target's figure beside it where it is another configuration; [] without a fastest."""
    summaries = target_time.summarise(records)
    fastest = target_time.fastest(summaries)
    if fastest is None:
        return []
    out = []
    for name, of_row, say in (
        ("least energy to target", joules_to_target, _joules),
        ("cheapest to target", usd_to_target, dollars),
    ):
        least = _least(summaries, of_row)
        if least is None:
            continue
        value = _median(least, of_row)
        assert value is not None
        note = _stated_note(least, fastest) if of_row is joules_to_target else ""
        if least is fastest:
            out.append(f"{name}: the fastest to target too, {say(value)} median{note}")
            continue
        theirs = _median(fastest, of_row)
        beside = "" if theirs is None else f"; the fastest to target, {label(fastest.row)}: "
        beside += "" if theirs is None else say(theirs)
        out.append(f"{name}: {label(least.row)}, {say(value)} median{beside}{note}")
    return out


def _stated_note(least: target_time.TargetTime, fastest: target_time.TargetTime) -> str:
    """Which of the two configurations' joules are the user's stated CPU watts, said; ""
    none."""
    if any(stated(r) for r in least.rows):
        return " (the CPU's at its stated --cpu-watts)"
    if any(stated(r) for r in fastest.rows):
        return " (the fastest's CPU energy at its stated --cpu-watts)"
    return ""


def cost_line(best: dict[str, Any], ok: list[dict[str, Any]], among: list[str]) -> str | None:
    """The row with the least dollars per million samples and the fastest's
    beside it where that is another row (a device 10x the price must be over 10x faster to
    be both); None where no row has a price. At the fastest's own price per hour no row is
    cheaper than it: the verdict named it fastest by its best measurement (the confirmation's
    rounds), and another row at that price reads cheaper only by the rows' noisier figures."""
    price = best.get("usd_per_hour")
    priced = [
        r
        for r in ok
        if finite(r.get("usd_per_million_samples"))
        and (standing.identity(r) == standing.identity(best) or r.get("usd_per_hour") != price)
    ]
    if not priced:
        return None
    top = min(priced, key=lambda r: float(r["usd_per_million_samples"]))
    cheap = float(top["usd_per_million_samples"])
    if standing.identity(top) == standing.identity(best):
        return f"the fastest is the cheapest too: {dollars(cheap)} per million samples"
    fastest = "no price given"
    if finite(best.get("usd_per_million_samples")):
        fastest = f"{dollars(float(best['usd_per_million_samples']))} per million samples"
    return (
        f"{label(top, among)}, {dollars(cheap)} per million samples; "
        f"the fastest, {label(best, among)}: {fastest}"
    )
