"""Time to target over seeds: the one notion of "fastest to target" that the verdict, the batch
analysis and the console share.

A configuration is a convergence row's whole identity but its seed: its rows are the seeds it
ran (the target is not part of it: a run that failed, out of memory say, records no target).
Its time to target is the median over those seeds of `time_to_target_s` (training seconds until
the first evaluation that met the target), with the fastest and slowest seed beside it. A
configuration can be the fastest only where every seed it ran reached the target (a seed that
missed it, diverged, ran out of memory or failed counts as a run that did not): the median of
the seeds that did would hide the ones that did not, so such a configuration is reported with
"k of n seeds" and never chosen.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpubench.config.keys import configuration
from gpubench.science.partition import finite, grouped
from gpubench.science.partition import norm as _norm
from gpubench.store.wording import plural, seconds, times

# The seeds of a configuration disagree when the slowest took more than this many times as long
# as the fastest to reach the target. In the committed CPU convergence run
# (results/20261122-cpu-convergence: 12 configurations x 2 seeds) the largest ratio is 1.40x, and
# neighbouring batch sizes there differ by 1.25-2.78x in median time: beyond 2x, which seeds ran
# can reorder the batch sizes, so the median over a few seeds is not an answer to repeat.
SPREAD_LIMIT = 2.0


def is_convergence(row: Mapping[str, Any]) -> bool:
    """Whether `row` comes from a convergence run (those carry their lr scaling rule)."""
    return _norm(row.get("lr_scaling")) is not None


@dataclass(frozen=True)
class TargetTime:
    """One configuration's time to target over the seeds it ran (seconds of training)."""

    rows: tuple[dict[str, Any], ...]  # every run of the configuration, in seed order
    times_s: tuple[float, ...]  # the time to target of each run that reached it, ascending

    @property
    def row(self) -> dict[str, Any]:  # every run has the same identity but its seed
        return self.rows[0]

    @property
    def batch_size(self) -> int:
        return int(self.row["batch_size"])

    @property
    def runs(self) -> int:
        return len(self.rows)

    @property
    def reached(self) -> int:
        return len(self.times_s)

    @property
    def complete(self) -> bool:
        """Every run reached the target: only such a configuration can be the fastest."""
        return self.reached == self.runs > 0

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.times_s) if self.times_s else None

    @property
    def median_steps(self) -> float | None:
        """The median over the runs that reached the target of their steps to it (None where
        none records them): how far each trained, which the seconds alone do not say."""
        steps = [float(r["steps_to_target"]) for r in self.rows if finite(r.get("steps_to_target"))]
        return statistics.median(steps) if steps else None

    @property
    def min_s(self) -> float | None:
        return self.times_s[0] if self.times_s else None

    @property
    def max_s(self) -> float | None:
        return self.times_s[-1] if self.times_s else None

    @property
    def spread(self) -> float | None:
        """Slowest over fastest seed's time to target (None under two seeds that reached it)."""
        if self.reached < 2:
            return None
        lo, hi = self.times_s[0], self.times_s[-1]
        if lo > 0:
            return hi / lo
        return 1.0 if hi == 0 else math.inf

    @property
    def disagree(self) -> bool:
        """The seeds' times to target span more than SPREAD_LIMIT times."""
        return self.spread is not None and self.spread > SPREAD_LIMIT

    def _over(self) -> str:
        seeds = {_norm(r.get("seed")) for r in self.rows}
        noun = "seed" if len(seeds) == self.runs else "run"
        return plural(self.runs, noun)

    def describe(self) -> str:
        """E.g. "0.410 s median over 3 seeds, 312 steps (0.220-0.950 s, spread x4.32: seeds
        disagree)" (the steps: their median, where the rows record them), or "reached the
        target in 0 of 2 seeds"."""
        if self.median_s is None:
            return f"reached the target in 0 of {self._over()}"
        if self.complete:
            text = f"{seconds(self.median_s)} median over {self._over()}"
        else:
            text = (
                f"reached the target in only {self.reached} of {self._over()}, "
                f"{seconds(self.median_s)} median of those"
            )
        if self.median_steps is not None:
            text += f", {plural(round(self.median_steps), 'step')}"
        if self.spread is None:
            return text
        lo, hi = seconds(self.min_s).removesuffix(" s"), seconds(self.max_s)
        flag = ": seeds disagree" if self.disagree else ""
        return f"{text} ({lo}-{hi}, spread {times(self.spread)}{flag})"

    def as_dict(self) -> dict[str, Any]:
        """The summary as plain values (seconds), for batch_analysis.json."""
        return {
            "runs": self.runs,
            "reached": self.reached,
            "median": self.median_s,
            "median_steps": self.median_steps,
            "min": self.min_s,
            "max": self.max_s,
            "spread": self.spread,
            "seeds_disagree": self.disagree,
        }


def summarise(rows: Iterable[Mapping[str, Any]]) -> list[TargetTime]:
    """One TargetTime per configuration among the convergence rows of `rows` (others are
    ignored), in the order of each configuration's first row."""
    groups = grouped((dict(r) for r in rows if is_convergence(r)), configuration)
    out = []
    for group in groups.values():
        runs = _last_runs(group)
        runs.sort(key=lambda r: (_norm(r.get("seed")) is None, _norm(r.get("seed")) or 0))
        times = sorted(
            float(r["time_to_target_s"]) for r in runs if finite(r.get("time_to_target_s"))
        )
        out.append(TargetTime(tuple(runs), tuple(times)))
    return out


def _last_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs that count: `tune --target` trains one configuration again from scratch at
    each rung it survives (rows with `tune_run`), so of those only the last run per seed stands
    (the earlier ones were cut short at a rung's limit, not misses)."""
    kept: dict[Any, dict[str, Any]] = {}
    plain = []
    for r in runs:
        if r.get("tune_run") is None:
            plain.append(r)
            continue
        seed = _norm(r.get("seed"))
        if seed not in kept or int(r["tune_run"]) > int(kept[seed]["tune_run"]):
            kept[seed] = r
    return plain + list(kept.values())


def fastest(summaries: Iterable[TargetTime]) -> TargetTime | None:
    """The configuration with the least median time to target among those whose every seed
    reached it (ties: the narrower spread, then the smaller batch); None where there is none."""
    complete = [s for s in summaries if s.complete]
    if not complete:
        return None
    return min(complete, key=lambda s: (s.median_s, s.max_s, s.batch_size))
