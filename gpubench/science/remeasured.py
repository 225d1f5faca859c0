"""One figure per configuration: where the verdict re-measured a configuration (run.confirm's
interleaved rounds in fresh processes), that figure is the one every view quotes, marked as
re-measured; elsewhere the row's own. A re-measured row whose own 95% interval misses its
re-measured figure is `unstable`: its interval did not hold in other processes.

apply() sets these on a run's rows read together with its confirm.json (the results file and
results.csv keep each row's own measurement):

- samples_per_s (and tokens_per_s in proportion): the configuration's figure, re-measured where
  `remeasured` is true;
- sweep_samples_per_s: the row's own figure where it was re-measured (null elsewhere);
- remeasured_low_samples_per_s, remeasured_high_samples_per_s: the re-measured figure's 95%
  interval, covering the spread between the processes (science.leaders.spread);
- unstable: true where the row's interval misses the re-measured figure, false where it holds
  it, null where the row was not re-measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpubench.config.keys import configuration
from gpubench.science import leaders


@dataclass(frozen=True)
class Remeasured:
    """A configuration's re-measured samples/s: the median over every round of every process,
    and its 95% interval between processes."""

    samples_per_s: float
    low: float
    high: float


def figures(partitions: list[dict[str, Any]] | None) -> dict[tuple[Any, ...], Remeasured]:
    """Per configuration (partition.configuration: its identity but the seed, which does not
    change its speed), its re-measured figure, from confirm.json's partitions (their decisions:
    a partition that decided nothing re-measured nothing)."""
    out: dict[tuple[Any, ...], Remeasured] = {}
    for p in partitions or []:
        if not p.get("decision"):
            continue
        d = leaders.Decision.from_dict(p["decision"])
        rounds = p.get("samples_per_s") or []
        for c, (candidate, median) in enumerate(
            zip(p["candidates"], d.median_samples_per_s, strict=True)
        ):
            if d.low_samples_per_s:
                low, high = d.low_samples_per_s[c], d.high_samples_per_s[c]
            else:  # recorded before processes: one process ran every round
                _, low, high = leaders.spread(rounds[c], d.processes or [len(rounds[c])])
            out[configuration(candidate)] = Remeasured(float(median), float(low), float(high))
    return out


COLUMNS = [
    "remeasured",
    "sweep_samples_per_s",
    "remeasured_low_samples_per_s",
    "remeasured_high_samples_per_s",
    "unstable",
]


def apply(frame: pd.DataFrame, partitions: list[dict[str, Any]] | None) -> pd.DataFrame:
    """`frame` (one run's rows) with the COLUMNS above set from its confirm.json's
    `partitions`, and the samples/s (and tokens/s) of each row of a re-measured configuration
    (every seed's) its re-measured figure; a copy, `frame` itself untouched. Without
    partitions: `remeasured` false, the rest null."""
    out = frame.copy()
    found = figures(partitions)
    records = out.to_dict("records")
    marks: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    sps, tps = [], []
    for r in records:
        m = found.get(configuration(r)) if r.get("status") == "ok" else None
        own = r.get("samples_per_s")
        if m is None or own is None or pd.isna(own) or float(own) <= 0:
            for c in COLUMNS:
                marks[c].append(False if c == "remeasured" else None)
            sps.append(own)
            tps.append(r.get("tokens_per_s"))
            continue
        marks["remeasured"].append(True)
        marks["sweep_samples_per_s"].append(float(own))
        marks["remeasured_low_samples_per_s"].append(m.low)
        marks["remeasured_high_samples_per_s"].append(m.high)
        marks["unstable"].append(leaders.unstable(r, m.samples_per_s))
        sps.append(m.samples_per_s)
        tokens = r.get("tokens_per_s")
        has_tokens = tokens is not None and not pd.isna(tokens)
        tps.append(float(tokens) * m.samples_per_s / float(own) if has_tokens else tokens)
    for c in COLUMNS:
        out[c] = pd.Series(marks[c], index=out.index, dtype=object)
    if "samples_per_s" in out:
        out["samples_per_s"] = pd.to_numeric(pd.Series(sps, index=out.index), errors="coerce")
    if "tokens_per_s" in out:
        out["tokens_per_s"] = pd.to_numeric(pd.Series(tps, index=out.index), errors="coerce")
    return out
