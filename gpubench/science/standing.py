"""How sure a verdict is: which configuration leads, which it cannot be told from, what that
was decided on (the interleaved confirmation of run.confirm, else the rows' own intervals), and
which rows behind it were measured contended or noisy.

headline() says it in the verdict's first line, each configuration's figure the one every
view quotes (science.remeasured: the re-measured one where there is one, else the row's); a
tie states the leader's measured gap over each tied configuration with its 95% interval and the
one reason that held, the tied configurations ordered by the smaller batch, then by samples
per joule (tie_order), at most MAX_TIED beside the leader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpubench.config.keys import configuration, identity, identity_dict
from gpubench.science import leaders
from gpubench.science.partition import device_of, grouped, label, norm
from gpubench.store.wording import number, percent, plural, seconds, span, times


@dataclass(frozen=True)
class Lead:
    """The fastest row (the leader of a tie), the rows tied with it (as dicts: label, samples/s,
    identity, `ratio` leader over it, `bound` the most the leader could be ahead of it (the
    interval's upper bound, less 1), and `source`: "rounds" where the interleaved rounds
    measured the ratio and the figure, "rows" where both are the sweep's rows'), the sentence
    saying how that was decided, the confirmation's record (None: none ran), the leader's
    samples/s in the rounds (None where no rounds tie it with anything), the margin, and
    `paired`: the rounds' comparison of the leader with each candidate they measured, by the
    candidate's identity (what a lever measured in the same minutes says)."""

    best: dict[str, Any]
    ties: list[dict[str, Any]]
    confidence: str
    record: dict[str, Any] | None
    rounds_samples_per_s: float | None = None
    margin: float = leaders.MARGIN
    paired: dict[tuple[Any, ...], leaders.Comparison] = field(default_factory=dict)


def contended(row: dict[str, Any]) -> bool:
    """Measured while other processes shared its cores (`busy`), or too noisy to rank."""
    return row.get("busy") is True or norm(row.get("noisy")) == 1


def ran(row: dict[str, Any]) -> bool:
    """An ok row with a samples/s figure."""
    return row.get("status") == "ok" and positive(row.get("samples_per_s")) is not None


def pool(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows a verdict compares: per device, those that ran on cores of their own (not
    `busy`), or, where none of that device's did, all of that device's that ran; every device
    keeps its rows, so the filter never decides between devices (a GPU point's own sampler can
    mark every CUDA row busy: the CPU must not win by default). A `noisy` row stays: its wide
    interval already makes it a candidate or a tie, and leaving out whichever rows happened to
    be noisy in a run would change the answer from run to run. Order is that of `rows`."""
    kept = {id(r) for device in by_device(rows).values() for r in _clean_or_all(device)}
    return [r for r in rows if id(r) in kept]


def alone(rows: list[dict[str, Any]]) -> str:
    """Why `rows` (one partition's, failed ones too) leave one configuration to compare, where
    pool() keeps a single row: only one ran, or the others that ran were contended (busy) and
    left out, said with the counts."""
    ran_ = [r for r in rows if ran(r)]
    if len(ran_) <= 1:
        return "a single configuration ran"
    left_out = len(ran_) - len(pool(rows))
    return (
        f"one configuration to compare: {left_out} of the {len(ran_)} that ran were contended "
        "(busy) and left out"
    )


def _clean_or_all(ok: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in ok if r.get("busy") is not True] or ok


def by_device(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows that ran, per device (device_of: "cpu", "cuda", a pooled GPU with its name),
    devices in the order they first appear."""
    return grouped((r for r in rows if ran(r)), device_of)


def lead(
    pool: list[dict[str, Any]],
    confirmation: dict[str, Any] | None,
    among: list[str],
    margin: float = leaders.MARGIN,
) -> Lead:
    """The lead among `pool` (ok rows of one partition, or of one device of it): from
    `confirmation`'s rounds where they re-measured rows of the pool, its fastest row among them
    (rounds that never measured the pool's fastest cannot say what leads it: a confirmation
    of one device's rows decides nothing across devices), else from the rows' intervals; a lead
    of no more than `margin` is a tie either way."""
    by_id = {identity(r): r for r in pool}
    # the rows' leader by its own figure: the one the rounds had to re-measure
    top = max(pool, key=own_figure)
    if confirmation is not None and confirmation.get("decision"):
        rows = [by_id.get(identity(c)) for c in confirmation["candidates"]]
        if any(r is top for r in rows) and None not in rows:
            others = [by_id.get(identity(c)) for c in confirmation.get("unmeasured", [])]
            unmeasured = [r for r in others if r is not None]
            return _confirmed(rows, unmeasured, confirmation, among, margin)  # type: ignore[arg-type]
    best, *tied = leaders.by_intervals(pool, margin)
    # one configuration under several seeds is one candidate, not a tie with itself
    tied = _other_configurations(best, tied)
    why = _not_confirmed(confirmation, among)
    if tied:
        ties = [row_tie(best, r, among, margin) for r in tied]
        text = "; ".join(f"{t['label']}: {t['reason']}" for t in ties)
        return Lead(best, ties, f"tied by the rows ({text}); {why}", confirmation, None, margin)
    fastest_first = sorted(pool, key=lambda r: -float(r["samples_per_s"]))
    runner_up = _other_configurations(best, fastest_first)[:1]
    text = "the only row"
    for r in runner_up:
        text = (
            f"its 95% interval clears every other row's by over {percent(leaders.DRIFT)}, and its "
            f"figure theirs by over the {percent(margin)} margin ({times(_ratio(best, r))} the "
            f"runner-up, {label(r, among)})"
        )
    return Lead(best, [], f"{text}; {why}", confirmation, None, margin)


def _other_configurations(best: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` (fastest first) less those of `best`'s configuration, and each other
    configuration once: its first, fastest row."""
    seen = {configuration(best)}
    out = []
    for r in rows:
        if configuration(r) not in seen:
            seen.add(configuration(r))
            out.append(r)
    return out


def own_figure(row: dict[str, Any]) -> float:
    """A row's own samples/s as the sweep measured it (science.remeasured keeps it in
    `sweep_samples_per_s` where the frame quotes the re-measured figure)."""
    own = row.get("sweep_samples_per_s")
    return float(row["samples_per_s"]) if own is None or own != own else float(own)


def as_measured(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with its own samples/s as the sweep measured it (own_figure()): what a comparison
    with rows that were not re-measured weighs."""
    own = own_figure(row)
    return row if own == float(row["samples_per_s"]) else {**row, "samples_per_s": own}


def row_tie(
    best: dict[str, Any], row: dict[str, Any], among: list[str], margin: float
) -> dict[str, Any]:
    """A row tied with `best` by the rows' own figures and intervals: the ratio, its interval
    (best's interval over row's), and the one reason the rows cannot tell them apart."""
    top_low, top_high = leaders.interval(best)
    low, high = leaders.interval(row)
    return {
        "label": label(row, among),
        "samples_per_s": float(row["samples_per_s"]),
        "identity": identity_dict(row),
        "ratio": _ratio(best, row),
        "low": top_low / high,
        "high": top_high / low if low > 0 else float("inf"),
        "bound": leaders.bound(best, row),
        "reason": _row_reason(best, row, margin),
        "source": "rows",
        "samples_per_j": positive(row.get("samples_per_j")),
    }


def _row_reason(best: dict[str, Any], row: dict[str, Any], margin: float) -> str:
    """The first reason that holds why the rows cannot tell `row` from `best`."""
    top_low = leaders.interval(best)[0]
    high = leaders.interval(row)[1]
    if high >= top_low:
        return "the rows' 95% intervals overlap"
    if float(row["samples_per_s"]) * (1 + margin) >= float(best["samples_per_s"]):
        return f"the figures are within the {percent(margin)} margin"
    return (
        f"the rows' intervals come within {percent(leaders.DRIFT)} of each other (the drift "
        "between points measured minutes apart)"
    )


def positive(v: Any) -> float | None:
    """`v` as a float where it is a positive number (None, NaN and 0 are not): a row's
    samples per joule is None where energy was not measured."""
    return float(v) if v is not None and v == v and float(v) > 0 else None


def _confirmed(
    rows: list[dict[str, Any]],
    unmeasured: list[dict[str, Any]],
    record: dict[str, Any],
    among: list[str],
    margin: float,
) -> Lead:
    """The lead the rounds decided among `rows`, at `margin` (whatever margin the record was
    decided at: the comparisons are the rounds', the margin the reader's); `unmeasured` could
    be the fastest too (their intervals reach the leader's) but did not fit the budget: they
    tie with the leader, by the rows' figures."""
    d = leaders.recorded(record, margin)
    best = rows[d.leader]
    comps = {c.candidate: c for c in d.comparisons}
    paired = {identity(rows[i]): c for i, c in comps.items()}
    rounds = f"{d.rounds} interleaved rounds ({seconds(record.get('seconds') or 0)})"
    busy = record.get("other_load_cores")
    shared = (
        f", other processes using {number(float(busy))} cores meanwhile (on every candidate alike)"
        if record.get("busy") and busy is not None
        else ""
    )
    against = "; ".join(
        f"{times(c.ratio)} over {label(rows[i], among)} (95% CI {span(c.low, c.high)}"
        + ("" if c.holds(margin) else f": {_reading(c, margin)}")
        + ")"
        for i, c in sorted(comps.items())
    )
    # a row the budget left out ties with the leader only where the rows cannot tell them
    # apart (within the margin, or their intervals overlap); one clearly slower by the rows
    # is said so, never "tied" (a row 31% slower read "so tied with it")
    # rows against rows: the leader's own row figure, not its re-measurement
    mine = as_measured(best)
    close = [r for r in unmeasured if _rows_tie(mine, r, margin)]
    slower = [r for r in unmeasured if not _rows_tie(mine, r, margin)]
    untested = [
        row_tie(mine, r, among, margin)
        | {"re_measured": False, "reason": f"{_row_reason(mine, r, margin)}, not re-measured"}
        for r in close
    ]
    also = (
        f"; not re-measured (over the budget), so tied with it by the rows: "
        f"{', '.join(t['label'] for t in untested)}"
        if untested
        else ""
    )
    if slower:
        also += "; not re-measured (over the budget), slower by the rows: " + ", ".join(
            f"{label(r, among)} ({times(_ratio(mine, r), 3)})" for r in slower
        )
    if d.winner is not None:
        held = (
            f"its lead held, by more than the {percent(margin)} margin, over "
            f"{rounds}{shared}: {against}{also}"
        )
        return Lead(best, untested, held, record, None, margin, paired)
    medians = d.median_samples_per_s or [float(r["samples_per_s"]) for r in rows]
    ties = [
        {
            "label": label(rows[i], among),
            "samples_per_s": float(medians[i]),
            "identity": identity_dict(rows[i]),
            "ratio": comps[i].ratio,
            "low": comps[i].low,
            "high": comps[i].high,
            "bound": comps[i].high - 1,
            "reading": comps[i].reading(margin),
            "reason": _reading(comps[i], margin),
            "source": "rounds",
            "samples_per_j": positive(rows[i].get("samples_per_j")),
        }
        for i in d.tied[1:]
    ]
    return Lead(
        best,
        ties + untested,
        f"no lead of more than the {percent(margin)} margin held over {rounds}{shared}: "
        f"{against}{also}",
        record,
        float(medians[d.leader]),
        margin,
        paired,
    )


def _rows_tie(best: dict[str, Any], row: dict[str, Any], margin: float) -> bool:
    """Whether the rows cannot tell `row` from `best`: its figure within `margin` of best's, or
    its 95% interval reaching best's."""
    within = float(row["samples_per_s"]) * (1 + margin) >= float(best["samples_per_s"])
    return within or leaders.interval(row)[1] >= leaders.interval(best)[0]


def _reading(c: leaders.Comparison, margin: float) -> str:
    reading = c.reading(margin)
    if reading == "equivalent":
        return f"within the {percent(margin)} margin either way: no practical difference"
    if reading == "cannot tell":
        return "the interval reaches x1: the rounds cannot tell which is faster"
    return f"ahead, but not shown to be by more than the {percent(margin)} margin"


def _not_confirmed(record: dict[str, Any] | None, among: list[str]) -> str:
    if record is None:
        return "not re-measured (no confirmation in this run)"
    if record.get("decision"):  # it decided, but among rows other than this pool's leaders
        which = " and ".join(label(c, among) for c in record["candidates"])
        return f"not re-measured (the confirmation re-measured {which})"
    return f"not re-measured ({record.get('reason') or record.get('status')})"


def _ratio(a: dict[str, Any], b: dict[str, Any]) -> float:
    return float(a["samples_per_s"]) / float(b["samples_per_s"])


def stands_on(
    ok: list[dict[str, Any]], best: dict[str, Any], among: list[str]
) -> tuple[str | None, dict[str, int]]:
    """What the answer stands on, said where any row was contended (`busy`) or `noisy`: per
    device (named where the rows span several), the contended rows left out of its comparison,
    or that every one of its rows was contended and all were kept and compared; the noisy rows
    kept (their wide intervals make ties, not winners); and whether the fastest is one of them.
    None (and the counts) when every row was clean."""
    counts = device_counts(ok)
    if not counts["busy"] and not counts["noisy"]:
        return None, counts
    devices = by_device(ok)
    said = [
        line
        for device, rows in devices.items()
        for line in _busy(rows, device if len(devices) > 1 else None, among)
    ]
    if counts["noisy"]:
        said.append(
            f"{counts['noisy']} of {plural(len(ok), 'row')} noisy (interval wider than the "
            "target), kept"
        )
    if contended(best):
        said.append("the fastest row itself is " + ("contended" if best.get("busy") else "noisy"))
    return "; ".join(said), counts


def _busy(rows: list[dict[str, Any]], device: str | None, among: list[str]) -> list[str]:
    """What one device's contended rows did to the comparison (`device` None: the only one)."""
    busy = [r for r in rows if r.get("busy") is True]
    rows_word = plural(len(rows), f"{device} row" if device else "row")
    if not busy:
        return []
    if len(busy) < len(rows):
        names = ", ".join(label(r, among) for r in busy[:3]) + (", ..." if len(busy) > 3 else "")
        return [f"{len(busy)} of {rows_word} contended (busy), left out ({names})"]
    if device is None:
        return [
            f"every one of {rows_word} was contended (busy): the answer may not hold on a "
            "quiet machine; re-run there, or with fewer --threads"
        ]
    return [
        f"every one of {rows_word} was contended (busy), all kept and compared with the other "
        f"devices' (their figures may be low; re-run on a quiet machine to be sure)"
    ]


def device_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many of `rows` (rows that ran) there are, and how many were contended (`busy`),
    `noisy`, and neither (`clean`)."""
    return {
        "rows": len(rows),
        "busy": len([r for r in rows if r.get("busy") is True]),
        "noisy": len([r for r in rows if norm(r.get("noisy")) == 1]),
        "clean": len([r for r in rows if not contended(r)]),
    }


# A tie names at most this many configurations beside its leader: the closest (explain --json
# lists them all).
MAX_TIED = 3


# Tied configurations whose figures lie within this share of the fastest's are alike, and the
# smaller batch leads among them; a member further off is in the tie only because the rounds
# could not tell (x12 apart, with an interval reaching x1 under load), and is not put first
# for its batch. 10%: the H100 transformer's B=4096, 6% under B=32768, leads that tie.
ALIKE = 0.10


def tie_order(members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Configurations that tie, in the order to prefer them: those within ALIKE of the fastest
    member's figure the smaller batch first (less memory), then the more samples per joule
    where energy was measured, then the faster; then the rest, the faster first. Each is a dict
    with `identity` (its batch_size), `samples_per_s` and `samples_per_j` (None: not
    measured)."""
    top = max(float(m["samples_per_s"]) for m in members)

    def key(m: dict[str, Any]) -> tuple[bool, float, float, float]:
        batch = (m.get("identity") or {}).get("batch_size")
        per_j = m.get("samples_per_j")
        rate = float(m["samples_per_s"])
        alike = rate * (1 + ALIKE) >= top
        return (
            not alike,
            float(batch) if batch is not None and alike else float("inf"),
            -float(per_j) if per_j is not None and alike else 0.0,
            -rate,
        )

    return sorted(members, key=key)


def closest(ties: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The MAX_TIED ties closest to the leader (by their ratio to it)."""
    return sorted(ties, key=lambda t: float(t.get("ratio", 1.0)))[:MAX_TIED]


def gap(t: dict[str, Any]) -> str:
    """A tie's measured gap: 'x1.04 (95% CI 0.99-1.08)' (the leader over it)."""
    low, high = t.get("low"), t.get("high")
    text = times(float(t["ratio"]))
    if low is None or high is None:
        return text
    return f"{text} (95% CI {span(float(low), float(high))})"


def headline(
    leader: dict[str, Any], ties: list[dict[str, Any]], margin: float, remeasured: bool = False
) -> str:
    """'fastest X, N samples/s' (', re-measured' where the figure is the verdict's
    re-measurement); in a tie, 'tie: A and B (N and M samples/s): X x1.04 over B (95% CI
    0.99-1.08), <the one reason that held>', the tied configurations in tie_order() (the
    smaller batch first), at most MAX_TIED beside the leader (the closest), each figure the one
    every view quotes. `leader`: label, samples_per_s, identity, samples_per_j."""
    mark = ", re-measured" if remeasured else ""
    fastest = leader["label"]
    if not ties:
        return f"fastest {fastest}, {number(float(leader['samples_per_s']))} samples/s{mark}"
    shown = closest(ties)
    members = tie_order([leader, *shown])
    names = " and ".join(m["label"] for m in members)
    figures = " and ".join(f"{number(float(m['samples_per_s']))}" for m in members)
    more = len(ties) - len(shown)
    also = f"; {more} more further off (explain --json lists them)" if more else ""
    why = "; ".join(
        f"{fastest} {gap(t)} over {t['label']}" + (f": {t['reason']}" if t.get("reason") else "")
        for t in shown
    )
    return f"tie: {names} ({figures} samples/s{mark}): {why}{also}"
