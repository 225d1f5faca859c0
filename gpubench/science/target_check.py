"""A predicted "fastest to target" checked by training (issue 51, item 5; `sweep
--confirm-target`): the goodput pick (science.goodput), the throughput-fastest batch and the
pick's neighbour between them train on the model's real data to its target, a few seeds each
(run.target_confirm, into store.target_runs), and this says what the runs found against what
was predicted: "predicted x1.80, measured x1.70", or that the prediction missed, with both
figures. Pure functions of rows.

A batch counts as measured only where every seed it ran reached the target (science.target_time:
the median of the seeds that did would hide those that did not). The prediction holds where the
predicted batch is the fastest of the batches trained; it misses where another is, and says by
how much (the medians' ratio) and whether the two batches' seeds overlap (the pick's fastest seed
no slower than the winner's slowest): a miss that 3 seeds cannot tell from a tie.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpubench.config.keys import Key, same_key
from gpubench.science import target_time
from gpubench.science.goodput import GoodputPick
from gpubench.science.target_time import TargetTime
from gpubench.store.wording import number, plural, times

# What a run to the target changes of the leader's configuration it checks: its batch and seed,
# the learning-rate rule it trains with, and its data (the real data set, kept on the device).
CHANGED = ("batch_size", "seed", "lr_scaling", "data")
CONFIRMED, MISSED, UNSETTLED = "confirmed", "missed", "unsettled"


def trained_key(row: Mapping[str, Any]) -> Key:
    """The configuration a run to the target checks: its identity but what CHANGED, the same
    for the leader's speed row and each run that trains it."""
    return same_key(row, *CHANGED)


def batches_for(pick: GoodputPick, limit: int | None = None) -> tuple[int, ...]:
    """The batches to train, ascending: the predicted pick, the throughput-fastest batch and the
    pick's measured neighbour between them (none where the two are neighbours): whether the
    optimum lies a step toward throughput; where the pick is the throughput-fastest batch, it
    and its measured neighbours, so that the runs can refute it. Only measured batches up to
    `limit` (a data set's training samples; None: any) train: where the throughput-fastest
    batch is above it, the largest that is not stands in for it; () where the pick is above."""
    grid = [b for b in sorted(pick.times) if limit is None or b <= limit]
    if pick.batch not in grid:
        return ()
    i = grid.index(pick.batch)
    j = grid.index(pick.throughput_batch) if pick.throughput_batch in grid else len(grid) - 1
    if i == j:
        return tuple(grid[max(0, i - 1) : i + 2])
    step = 1 if j > i else -1
    return tuple(sorted({grid[i], grid[i + step], grid[j]}))


@dataclass(frozen=True)
class TargetCheck:
    """What the runs to the target found: each trained batch's time to target over its seeds
    (`trained`, ascending batch), against the predicted pick `predicted`, the throughput-fastest
    batch `throughput` and the predicted gain of the one over the other (`predicted_gain`,
    T(throughput) / T(predicted)); `metric`, `target` and `dataset`: what they trained to."""

    predicted: int
    throughput: int
    predicted_gain: float
    trained: tuple[TargetTime, ...]
    metric: str
    target: float
    dataset: str

    def _of(self, batch: int) -> TargetTime | None:
        return next((t for t in self.trained if t.batch_size == batch), None)

    def _time(self, batch: int) -> float | None:
        """`batch`'s median time to target where every seed it ran reached it, else None."""
        t = self._of(batch)
        return t.median_s if t is not None and t.complete else None

    @property
    def fastest(self) -> int | None:
        """The trained batch of least median time to target among those whose every seed
        reached it (science.target_time.fastest); None where none did."""
        best = target_time.fastest(self.trained)
        return None if best is None else best.batch_size

    @property
    def measured_gain(self) -> float | None:
        """T(throughput) / T(predicted) as trained (None where either missed a seed)."""
        mine, top = self._time(self.predicted), self._time(self.throughput)
        return top / mine if mine and top is not None else None

    @property
    def miss_factor(self) -> float | None:
        """Where the prediction missed: the predicted batch's median time to target over the
        fastest's (None where the predicted batch missed a seed, or did not miss)."""
        mine = self._time(self.predicted)
        if self.outcome != MISSED or mine is None or self.fastest is None:
            return None
        best = self._time(self.fastest)
        return mine / best if best else None

    @property
    def within_spread(self) -> bool:
        """Where the prediction missed by `miss_factor`: whether the predicted batch's fastest
        seed reached the target no later than the fastest batch's slowest seed, so that the
        seeds' times overlap and the runs do not tell the two apart."""
        if self.miss_factor is None or self.fastest is None:
            return False
        mine, best = self._of(self.predicted), self._of(self.fastest)
        assert mine is not None and best is not None  # both trained: miss_factor is set
        return mine.min_s is not None and best.max_s is not None and mine.min_s <= best.max_s

    def _by(self) -> str:
        """' (x1.09 by the medians, within the seeds' spread: their times overlap)', or ''."""
        if self.miss_factor is None:
            return ""
        where = (
            "within the seeds' spread: their times overlap"
            if self.within_spread
            else "outside the seeds' spread"
        )
        return f" ({times(self.miss_factor)} by the medians, {where})"

    @property
    def outcome(self) -> str:
        """CONFIRMED (the predicted batch trained fastest), MISSED (another batch did) or
        UNSETTLED (no trained batch reached the target in every seed, or one batch alone was
        trained: nothing to be faster than)."""
        if self.fastest is None or len(self.trained) < 2:
            return UNSETTLED
        return CONFIRMED if self.fastest == self.predicted else MISSED

    def relative_times(self) -> dict[int, float]:
        """Each trained batch's median time to target (every seed reached it) over the
        predicted batch's, or over the fastest's where the predicted batch missed a seed ({}
        where none reached it in every seed): what the report's chart draws beside the
        predicted times over the pick's."""
        times_s = {t.batch_size: t.median_s for t in self.trained if t.complete}
        base = times_s.get(self.predicted) or (
            times_s[self.fastest] if self.fastest is not None else None
        )
        if not base:
            return {}
        return {b: float(t) / base for b, t in times_s.items() if t is not None}

    def _seeds(self) -> str:
        most = max((t.runs for t in self.trained), default=0)
        return plural(most, "seed")

    def _task(self) -> str:
        """'eval_accuracy 0.8 on digits, 3 seeds a batch'."""
        return f"{self.metric} {number(self.target)} on {self.dataset}, {self._seeds()} a batch"

    def _gains(self) -> str:
        """'predicted x1.80, measured x1.70 over B=512' (or the measured part's absence said)."""
        top, said = f"B={self.throughput}", times(self.predicted_gain)
        got = self.measured_gain
        if self._of(self.throughput) is None or self._of(self.predicted) is None:
            return f"predicted {said} over {top}, not measured (not both trained)"
        if got is None:
            return f"predicted {said} over {top}, not measured (a seed missed the target)"
        return f"predicted {said}, measured {times(got)} over {top}"

    @property
    def contended(self) -> int:
        """How many runs trained while other processes shared their cores (`busy`): their
        times to target are slower and noisier than the machine's, the steps are not."""
        return sum(1 for t in self.trained for r in t.rows if r.get("busy") is True)

    def _busy(self) -> str:
        """'; 4 of 6 runs contended (...)', or '' where none was."""
        if not self.contended:
            return ""
        runs = sum(t.runs for t in self.trained)
        return (
            f"; {self.contended} of {plural(runs, 'run')} contended (other processes shared "
            "their cores: their times to target are slower and noisier than this machine's, "
            "their steps are not)"
        )

    def _each(self) -> str:
        """'B=32: 1.74 s median over 3 seeds, 54 steps (...); B=128: ...'."""
        return "; ".join(f"B={t.batch_size}: {t.describe()}" for t in self.trained)

    def line(self) -> str:
        """The verdict's words on the runs (quoting `to_dict`'s figures), each trained batch's
        time to target in brackets."""
        batches = ", ".join(f"B={t.batch_size}" for t in self.trained)
        if self.outcome == UNSETTLED:
            return (
                f"not settled by training ({self._task()}): "
                + (
                    f"no batch of {batches} reached the target in every seed"
                    if len(self.trained) > 1
                    else f"{batches} alone was trained"
                )
                + f" ({self._each()}){self._busy()}"
            )
        if self.outcome == CONFIRMED:
            said = f"B={self.predicted} trained fastest of {batches}"
            if self.predicted != self.throughput:
                said = self._gains()
            return f"confirmed by training ({self._task()}): {said} ({self._each()}){self._busy()}"
        text = (
            f"the prediction missed ({self._task()}): B={self.fastest} trained fastest of "
            f"{batches}, not the predicted B={self.predicted}{self._by()}"
        )
        if self.predicted != self.throughput:
            text += f"; {self._gains()}"
        return f"{text} ({self._each()}){self._busy()}"

    def cell(self) -> str:
        """The answer table's few words: 'confirmed (measured x1.70)', 'missed: B=32 trained
        fastest (x1.09, seeds overlap)' or 'unsettled by training'."""
        if self.outcome == UNSETTLED:
            return "unsettled by training"
        if self.outcome == MISSED:
            by = ""
            if self.miss_factor is not None:
                overlap = ", seeds overlap" if self.within_spread else ""
                by = f" ({times(self.miss_factor)}{overlap})"
            return f"missed: B={self.fastest} trained fastest{by}"
        got = self.measured_gain
        if self.predicted == self.throughput or got is None:
            return "confirmed by training"
        return f"confirmed (measured {times(got)})"

    def to_dict(self) -> dict[str, Any]:
        """`explain --json`'s fastest_to_target "confirmed": the outcome, the batches, both
        gains, what was trained to, each trained batch's time to target (seconds), the chart's
        `relative_times` and `text`."""
        return {
            "outcome": self.outcome,
            "predicted": self.predicted,
            "throughput_batch": self.throughput,
            "fastest": self.fastest,
            "predicted_gain": self.predicted_gain,
            "measured_gain": self.measured_gain,
            "miss_factor": self.miss_factor,
            "within_spread": self.within_spread,
            "metric": self.metric,
            "target": self.target,
            "dataset": self.dataset,
            "batches": {str(t.batch_size): t.as_dict() for t in self.trained},
            "relative_times": {str(b): t for b, t in self.relative_times().items()},
            "contended_runs": self.contended,
            "text": self.line(),
        }


def check_of(
    pick: GoodputPick, leader: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]
) -> TargetCheck | None:
    """The runs among `runs` (store.target_runs' rows) that trained `leader`'s configuration
    (trained_key), judged against `pick`; None where none did."""
    key = trained_key(leader)
    mine = [r for r in runs if trained_key(r) == key]
    if not mine:
        return None
    # what they trained to, from a run that recorded it (one refused or failed early did not)
    first = next((r for r in mine if r.get("target") is not None), mine[0])
    trained = sorted(target_time.summarise(mine), key=lambda t: t.batch_size)
    return TargetCheck(
        pick.batch,
        pick.throughput_batch,
        pick.gain,
        tuple(trained),
        str(first.get("target_metric")),
        float(first.get("target") or 0.0),
        str(first.get("dataset")),
    )
