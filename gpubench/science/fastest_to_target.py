"""The answer to "which batch reaches the target soonest" for one model: the goodput pick
(science.goodput) over a sweep's measured samples/s per batch, with the gradient noise scale
B_noise that convergence rows measured on real data (science.convergence), or one given.

Speed points run on synthetic batches, whose noise scale means nothing, so the B_noise comes
only from convergence rows of the same model, size and optimizer (the preconditioned figure
under Adam and AdamW, else the raw one); where there is none the answer says it is not
predicted, and what would give it. Pure functions of rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from statistics import median
from typing import Any

from gpubench.science import goodput, target_time
from gpubench.science.gradient_noise import across_seeds
from gpubench.science.target_check import TargetCheck, check_of
from gpubench.store.noise_record import NoiseEntry
from gpubench.store.wording import number, percent, plural, span, times

# what a run folder needs for a prediction, said where it has none
NOT_PREDICTED = (
    "not predicted (synthetic data: no B_noise measured on real data for this model; a "
    "sweep's noise phase measures it where its steps fit the budget (--noise-budget S, "
    "docs/suites.md), and so does a convergence run: python -m gpubench sweep "
    "suites/convergence.toml --models {model})"
)
# the answer table's cell where there is no prediction: the reason, in a few words
SHORT_WHY = "not predicted (synthetic data)"


@dataclass(frozen=True)
class NoiseEstimate:
    """B_noise with its interval [`low`, `high`] (None: none; `high` may be inf), `kind`
    ("preconditioned" or "raw") and `where` (the steps and runs it was taken over)."""

    b_noise: float
    low: float | None
    high: float | None
    kind: str
    where: str


def _value(row: Mapping[str, Any], column: str) -> float | None:
    v = row.get(column)
    return float(v) if isinstance(v, int | float) and math.isfinite(v) and v > 0 else None


def noise_of(rows: Sequence[Mapping[str, Any]]) -> NoiseEstimate | None:
    """B_noise from convergence rows (their noise_scale_* columns), or None where none has one:
    the preconditioned figure where any row has one, else the raw one; one row's own interval,
    or with several rows the geometric mean and t-interval across them (seeds and batches)."""
    for kind, column in (
        ("preconditioned", "noise_scale_b_noise_preconditioned"),
        ("raw", "noise_scale_b_noise"),
    ):
        having = [r for r in rows if _value(r, column) is not None]
        if not having:
            continue
        first = min(int(r["noise_scale_first_step"]) for r in having)
        last = max(int(r["noise_scale_last_step"]) for r in having)
        where = f"steps {first}-{last} of {plural(len(having), 'convergence run')}"
        if len(having) == 1:
            (row,) = having
            low, high = _value(row, f"{column}_low"), _value(row, f"{column}_high")
            # a stored interval with a null high end is unbounded (|G|^2 not told from 0)
            return NoiseEstimate(
                float(row[column]), low, math.inf if high is None and low else high, kind, where
            )
        centre, low, high = across_seeds([float(r[column]) for r in having])
        return NoiseEstimate(centre, low, high, kind, f"{where}, across them")
    return None


def noise_of_phase(entries: Sequence[NoiseEntry], best: Mapping[str, Any]) -> NoiseEstimate | None:
    """B_noise from a sweep's noise phase (store.noise_record) for `best`'s model, size and
    optimizer (its device's entry first, else any device's: B_noise is the data's and the
    model's, not the device's); None where the phase measured none."""
    same = [
        e
        for e in entries
        if (e.model, e.model_size, e.optimizer)
        == (best.get("model"), best.get("model_size"), best.get("optimizer"))
    ]
    if not same:
        return None
    e = min(same, key=lambda e: e.device != best.get("device"))
    # a stored interval with a null high end is unbounded (|G|^2 not told from 0)
    high = math.inf if e.high is None and e.low is not None else e.high
    return NoiseEstimate(e.b_noise, e.low, high, e.kind, e.where())


def samples_per_s_by_batch(rows: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """Each batch's median samples/s over `rows` (one configuration's rows but the batch)."""
    by: dict[int, list[float]] = {}
    for r in rows:
        x = r.get("samples_per_s")
        if isinstance(x, int | float) and math.isfinite(x) and x > 0:
            by.setdefault(int(r["batch_size"]), []).append(float(x))
    return {b: median(xs) for b, xs in sorted(by.items())}


def _throughput_batch(samples_per_s: Mapping[int, float]) -> int:
    """The batch of most samples/s (the smaller of equals), as goodput.pick names it."""
    return min(samples_per_s, key=lambda b: (-samples_per_s[b], b))


@dataclass(frozen=True)
class MeasuredPick:
    """The batch whose every seed reached the target soonest (least median time to target,
    science.target_time.fastest), the throughput-fastest batch of the same samples/s the
    prediction uses, and `gain` = the throughput-fastest batch's median time to target over the
    pick's (None where that batch did not reach the target in every seed); `times_s`: the
    median time to target (seconds) of each batch whose every seed reached it."""

    batch: int
    throughput_batch: int
    gain: float | None
    times_s: dict[int, float]


def measured_of(
    rows: Sequence[Mapping[str, Any]], samples_per_s: Mapping[int, float]
) -> MeasuredPick | None:
    """The measured fastest-to-target batch among `rows` (one configuration's rows but the batch
    and seed, failed seeds included: they did not reach the target), against the
    throughput-fastest batch of `samples_per_s`; None where no batch reached the target in
    every seed, or no samples/s was measured."""
    summaries = [s for s in target_time.summarise(rows) if s.complete]
    best = target_time.fastest(summaries)
    if best is None or not samples_per_s:
        return None
    times_s = {s.batch_size: float(s.median_s or 0.0) for s in summaries}
    top = _throughput_batch(samples_per_s)
    mine = times_s[best.batch_size]
    gain = times_s[top] / mine if top in times_s and mine > 0 else None
    return MeasuredPick(best.batch_size, top, gain, dict(sorted(times_s.items())))


def critical_of(
    rows: Sequence[Mapping[str, Any]],
) -> tuple[goodput.CriticalBatchFit | None, str | None]:
    """B_crit fitted (goodput.fit_critical_batch: S = S_min (1 + B_crit/B)) to the steps to
    target of `rows`' convergence runs (one configuration's rows but the batch and seed), over
    the batches whose every seed reached the target (a missed seed would bias its batch's
    steps down); (None, why) where under 3 such batches, or where the fit is not of that form."""
    done = [s for s in target_time.summarise(rows) if s.complete]
    if not done:
        return None, None  # no convergence run reached the target: nothing to say
    points = [
        (float(s.batch_size), float(r["steps_to_target"]))
        for s in done
        for r in s.rows
        if isinstance(r.get("steps_to_target"), int | float)
        and math.isfinite(r["steps_to_target"])
        and r["steps_to_target"] > 0
    ]
    if len({b for b, _ in points}) < 3:
        return None, (
            f"no B_crit fit: steps to target at {plural(len(done), 'batch', 'batches')} "
            "whose every seed reached it, 3 needed"
        )
    fit = goodput.fit_critical_batch(points)
    if fit.b_crit is None:
        return None, "no B_crit fit: the steps to target do not follow S_min (1 + B_crit/B)"
    return fit, None


@dataclass(frozen=True)
class FastestToTarget:
    """The goodput pick of one model (None where not predicted, with `why`), its B_noise, the
    samples/s per batch it was picked from, and the measured pick where convergence rows
    reached the target (None: none did)."""

    pick: goodput.GoodputPick | None
    noise: NoiseEstimate | None
    why: str | None = None
    samples_per_s: dict[int, float] | None = None
    measured: MeasuredPick | None = None
    # B_crit from the convergence rows' steps to target, stated beside B_noise, or why none
    critical: goodput.CriticalBatchFit | None = None
    critical_why: str | None = None
    # the prediction checked by training (sweep --confirm-target), None where not trained
    check: TargetCheck | None = None

    def critical_text(self) -> str | None:
        """'B_crit ≈ 35.6 fitted to steps to target at 3 batches (S = S_min (1 + B_crit/B),
        relative rms residual 12%)', the reason there is no fit, or None (no convergence run
        reached the target)."""
        c = self.critical
        if c is None:
            return self.critical_why
        return (
            f"B_crit ≈ {number(c.b_crit)} fitted to steps to target at "
            f"{plural(c.batches, 'batch', 'batches')} (S = S_min (1 + B_crit/B), relative "
            f"rms residual {percent(c.rel_rmse)})"
        )

    def cell(self) -> str:
        """The answer table's cell: 'B=128 measured (x1.81 over B=512)', 'B=128 predicted (x1.30
        over B=512)', 'B=512 predicted (the throughput-fastest)', 'B=64 predicted, uncertain (B=4
        to B=4096 over B_noise's interval)' (no gain claimed: `uncertain`), or the short reason
        there is none. Measured where convergence rows reached the target; the figures are
        `to_dict`'s."""
        m, p = self.measured, self.pick
        if m is not None:
            if m.gain is None:
                return (
                    f"B={m.batch} measured (B={m.throughput_batch} did not reach the target "
                    "in every seed)"
                )
            return f"B={m.batch} measured ({_over(m.batch, m.throughput_batch, m.gain)})"
        if p is None or self.noise is None:
            return SHORT_WHY if self.noise is None else "not predicted (no samples/s)"
        if self.uncertain():
            text = f"B={p.batch} predicted, uncertain ({self._moves()})"
        else:
            text = f"B={p.batch} predicted ({_over(p.batch, p.throughput_batch, p.gain)})"
        return text if self.check is None else f"{text}, {self.check.cell()}"

    def uncertain(self) -> bool:
        """Whether the pick is not claimed: over B_noise's interval (its ends' picks) it moves
        more than one step of the measured batches from the pick, or the interval is unbounded
        above and its ends do not both pick the pick. False without a prediction or an
        interval (goodput.GoodputPick.holds None)."""
        p, n = self.pick, self.noise
        if p is None or n is None or p.low_batch is None or p.high_batch is None:
            return False
        if n.high == math.inf and not p.holds:
            return True
        grid = sorted(p.times)
        at = grid.index(p.batch)
        return any(abs(grid.index(b) - at) > 1 for b in (p.low_batch, p.high_batch))

    def _moves(self) -> str:
        """'B=4 to B=4096 over B_noise's interval (unbounded above)'."""
        p, n = self.pick, self.noise
        assert p is not None and n is not None
        above = " (unbounded above)" if n.high == math.inf else ""
        return f"B={p.low_batch} to B={p.high_batch} over B_noise's interval{above}"

    def line(self) -> str:
        """The verdict's words, quoting the figures `to_dict` holds."""
        parts = [self._prediction()]
        if self.check is not None:  # only a prediction is checked (answer)
            parts.append(self.check.line())
        crit = self.critical_text()
        return "; ".join(parts if crit is None else [*parts, crit])

    def _prediction(self) -> str:
        p, n = self.pick, self.noise
        if p is None or n is None:
            return self.why or "not predicted"
        interval = "" if n.low is None or n.high is None else f"{span(n.low, n.high)}, "
        text = f"predicted from B_noise ≈ {number(n.b_noise)} ({interval}{n.kind}; {n.where})"
        text += f" and this sweep's samples/s: B={p.batch}"
        if self.uncertain():
            return (
                f"{text}, uncertain: {self._moves()}, so no gain over the throughput-fastest "
                f"B={p.throughput_batch} is claimed (explain --json: fastest_to_target's "
                "relative_times at B_noise's centre)"
            )
        if p.batch == p.throughput_batch:
            text += ", the throughput-fastest batch too"
        else:
            text += (
                f"; the throughput-fastest B={p.throughput_batch} about {times(p.gain)} "
                "slower to target"
            )
        if p.holds is False:
            text += (
                f" (over B_noise's interval the pick moves: B={p.low_batch} to B={p.high_batch})"
            )
        return text

    def to_dict(self) -> dict[str, Any]:
        """`explain --json`'s "fastest_to_target": batch, "predicted", gain over the
        throughput-fastest batch, b_noise with its interval and kind, where it was taken,
        each batch's predicted time to target over the pick's (`relative_times`), `uncertain`
        with the batches the pick moves over (`moves_over`, [low end's, high end's]); or batch
        None and `why`. Always: the answer table's `cell` and `measured` (None, or the
        measured pick with each batch's median seconds to target)."""
        p, n, m = self.pick, self.noise, self.measured
        c = self.critical
        shared = {
            "cell": self.cell(),
            "b_crit": None if c is None else asdict(c),
            "b_crit_why": self.critical_why,
            # each batch's median seconds to target (JSON writes the batches as strings)
            "measured": None if m is None else asdict(m),
            # the prediction checked by training (sweep --confirm-target), else None
            "confirmed": None if self.check is None else self.check.to_dict(),
        }
        if p is None or n is None:
            return {
                "batch": None,
                "predicted": None,
                "why": self.why,
                "text": self.line(),
                **shared,
            }
        return {
            **shared,
            "batch": p.batch,
            "predicted": "predicted",
            "throughput_batch": p.throughput_batch,
            "gain": p.gain,
            "holds": p.holds,
            # the pick not claimed (uncertain()): the batches it moves over, else None
            "uncertain": self.uncertain(),
            "moves_over": [p.low_batch, p.high_batch] if self.uncertain() else None,
            "b_noise": n.b_noise,
            "interval": None if n.low is None else [n.low, None if n.high == math.inf else n.high],
            "kind": n.kind,
            "where": n.where,
            "relative_times": {str(b): t for b, t in self.relative_times().items()},
            "text": self.line(),
        }

    def relative_times(self) -> dict[int, float]:
        """Each measured batch's predicted time to target over the pick's (the pick 1.0; {}
        where not predicted): what the report's chart draws."""
        p = self.pick
        if p is None:
            return {}
        return {b: t / p.times[p.batch] for b, t in p.times.items()}


def _over(batch: int, top: int, gain: float) -> str:
    """'x1.30 over B=512', or 'the throughput-fastest' where `batch` is `top`."""
    return "the throughput-fastest" if batch == top else f"{times(gain)} over B={top}"


def answer(
    samples_per_s: Mapping[int, float],
    noise: NoiseEstimate | None,
    model: str,
    measured: MeasuredPick | None = None,
    critical: tuple[goodput.CriticalBatchFit | None, str | None] = (None, None),
    leader: Mapping[str, Any] | None = None,
    runs: Sequence[Mapping[str, Any]] = (),
) -> FastestToTarget:
    """The goodput pick over the measured `samples_per_s` (batch -> samples/s) at `noise`'s
    B_noise and interval ends; not predicted (with why) where there is no B_noise or no
    measured batch. `measured`: the pick convergence rows measured (measured_of), carried
    beside the prediction; `critical`: critical_of's B_crit fit of the same rows, or why none;
    `runs`: runs to the target (store.target_runs) that checked the pick for the configuration of
    `leader` (its speed row; science.target_check)."""
    rates = dict(sorted(samples_per_s.items()))
    beside = (rates, measured, *critical)
    if noise is None:
        return FastestToTarget(None, None, NOT_PREDICTED.format(model=model), *beside)
    if not samples_per_s:
        why = "not predicted (no batch's samples/s measured)"
        return FastestToTarget(None, noise, why, *beside)
    low, high = noise.low, noise.high
    if low is None or high is None or not low <= noise.b_noise <= high:
        low = high = None
    pick = goodput.pick(samples_per_s, noise.b_noise, low, high)
    check = check_of(pick, leader, runs) if leader is not None and runs else None
    return FastestToTarget(pick, noise, None, *beside, check=check)
