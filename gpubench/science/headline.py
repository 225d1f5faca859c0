"""A verdict's first line: the fastest configuration, or the tie, with figures that all come
from one measurement: the interleaved rounds' where the rounds tied the leader with something
(their medians, and "within X%" the upper bound of their ratio's interval), else the rows'
(their figures, and "within X%" the most the leader's interval puts it ahead of a tied row's).
A tied row the rounds did not re-measure is named after them, with its own row's figure."""

from __future__ import annotations

from typing import Any

from gpubench.science.standing import percent

# A tie whose bound is wider than this is no "within X%": its rows were too noisy for the
# difference to count (a tie of x1.68 read "within 67.7%").
WIDE_TIE = 0.25


def headline(
    fastest: str,
    samples_per_s: float,
    ties: list[dict[str, Any]],
    rounds_samples_per_s: float | None,
    margin: float,
) -> str:
    """'fastest X, N samples/s'; 'tie: X and Y within 1.6% (N and M samples/s)'; where the
    rounds put X ahead of every tied candidate (intervals above 1) but not surely by more than
    the margin, and by more than it at their upper bound, 'tie at the 3% margin: X and Y; the
    first ahead by 1.0%-10.0%, not shown to be more than 3% (...)'; where the bound is over
    WIDE_TIE, 'tie: X and Y, too noisy to tell apart (...)'; then '; also Z, not re-measured
    (K samples/s in the sweep's rows)' for the rows the rounds could not afford."""
    if not ties:
        return f"fastest {fastest}, {samples_per_s:,.0f} samples/s"
    measured = [t for t in ties if t.get("source") == "rounds"]
    if rounds_samples_per_s is None or not measured:
        return _tie(fastest, samples_per_s, ties, "", margin)
    rest = [t for t in ties if t.get("source") != "rounds"]
    text = _tie(fastest, rounds_samples_per_s, measured, ", interleaved rounds", margin)
    if rest:
        figures = " and ".join(f"{float(t['samples_per_s']):,.0f}" for t in rest)
        names = " and ".join(t["label"] for t in rest)
        text += f"; also {names}, not re-measured ({figures} samples/s in the sweep's rows)"
    return text


def _tie(
    fastest: str, leader_sps: float, ties: list[dict[str, Any]], where: str, margin: float
) -> str:
    names = " and ".join([fastest, *(t["label"] for t in ties)])
    figures = [leader_sps, *(float(t["samples_per_s"]) for t in ties)]
    rates = f"({' and '.join(f'{x:,.0f}' for x in figures)} samples/s{where})"
    within = max(float(t.get("bound", abs(float(t["ratio"]) - 1))) for t in ties)
    if where and all(float(t.get("low", 0.0)) > 1.0 and within > margin for t in ties):
        low = min(float(t["low"]) for t in ties) - 1
        return (
            f"tie at the {percent(margin)} margin: {names}; the first ahead by "
            f"{low:.1%}-{within:.1%}, not shown to be more than {percent(margin)} {rates}"
        )
    if within > WIDE_TIE:
        return f"tie: {names}, too noisy to tell apart {rates}"
    return f"tie: {names} within {within:.1%} {rates}"
