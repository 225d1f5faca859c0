"""Whether `tune --target` found the grid's fastest time to target, judged by the grid's own
figure for tune's pick (issue 29): tune's median for its pick was selected as the least of what
it measured, so it is biased low; the grid ran the same configuration over its seeds, and that
median (science.target_time) is what the pick is judged by, against the grid's fastest."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpubench.science.target_time import TargetTime, fastest, summarise
from gpubench.store import target_record
from gpubench.store.results import read_rows

TOLERANCE = 0.2  # a pick whose time to target is at most this much over the grid's best passes


@dataclass(frozen=True)
class TargetJudgement:
    """Tune's pick against the grid's fastest to the target. `pick_s`: the grid's median for the
    pick (None: not run, or not every seed reached it); `tune_s`: tune's own, shown only."""

    pick: str
    pick_s: float | None
    tune_s: float | None
    grid_best: str
    grid_best_s: float
    tolerance: float

    @property
    def ratio(self) -> float | None:
        return None if self.pick_s is None else self.pick_s / self.grid_best_s

    @property
    def within(self) -> bool:
        return self.ratio is not None and self.ratio <= 1 + self.tolerance

    def line(self) -> str:
        tune = "" if self.tune_s is None else f" (tune's own median {self.tune_s:.3g} s)"
        said = (
            "the grid has no complete figure for it"
            if self.ratio is None
            else f"{self.pick_s:.3g} s by the grid, x{self.ratio:.3f} the grid's best "
            f"({self.grid_best}, {self.grid_best_s:.3g} s), "
            f"{'within' if self.within else 'NOT within'} {self.tolerance:.0%}"
        )
        return f"tune's pick {self.pick}: {said}{tune}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio, "within": self.within}


def label(row: dict[str, Any]) -> str:
    return f"B={row['batch_size']} ({row.get('lr_scaling')})"


def judge_target(
    grid_rows: list[dict[str, Any]],
    pick: dict[str, Any],
    tune_s: float | None = None,
    tolerance: float = TOLERANCE,
) -> TargetJudgement:
    """Judge `pick` (batch_size, lr_scaling, lr where given) by the grid's `grid_rows`. Raises
    ValueError where no grid configuration reached the target on every seed, or the pick
    matches several."""
    if tolerance < 0:
        raise ValueError(f"tolerance {tolerance!r}: must be a non-negative fraction")
    summaries = summarise(grid_rows)
    best = fastest(summaries)
    if best is None or best.median_s is None:
        raise ValueError("no grid configuration reached the target with every seed")
    mine = [s for s in summaries if _same(s, pick)]
    if len(mine) > 1:
        raise ValueError(f"tune's pick {pick} matches {len(mine)} grid configurations")
    pick_s = mine[0].median_s if mine and mine[0].complete else None
    return TargetJudgement(label(pick), pick_s, tune_s, label(best.row), best.median_s, tolerance)


def _same(s: TargetTime, pick: dict[str, Any]) -> bool:
    row = s.row
    lr, mine = row.get("lr"), pick.get("lr")
    return (
        int(row["batch_size"]) == int(pick["batch_size"])
        and row.get("lr_scaling") == pick.get("lr_scaling")
        and (lr is None or mine is None or math.isclose(float(lr), float(mine), rel_tol=1e-6))
    )


def judge_target_runs(
    grid_dir: Path, tune_dir: Path, tolerance: float = TOLERANCE
) -> TargetJudgement:
    """Tune's answer in `tune_dir`/tune_target.json judged by the grid's rows in `grid_dir`."""
    answer = target_record.read(tune_dir).answer
    if answer is None:
        path = tune_dir / target_record.FILE
        raise ValueError(f"{path} names no answer: tune found no configuration to judge")
    tune_s = (answer.time_to_target or {}).get("median")
    return judge_target(read_rows(grid_dir), answer.config, tune_s, tolerance)
