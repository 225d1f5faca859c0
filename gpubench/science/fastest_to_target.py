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
from dataclasses import dataclass
from statistics import median
from typing import Any

from gpubench.science import goodput
from gpubench.science.gradient_noise import across_seeds
from gpubench.store.wording import number, plural, span, times

# what a run folder needs for a prediction, said where it has none
NOT_PREDICTED = (
    "not predicted (synthetic data: no B_noise measured on real data for this model; a "
    "convergence run measures it: python -m gpubench sweep suites/convergence.toml "
    "--models {model})"
)


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


def samples_per_s_by_batch(rows: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """Each batch's median samples/s over `rows` (one configuration's rows but the batch)."""
    by: dict[int, list[float]] = {}
    for r in rows:
        x = r.get("samples_per_s")
        if isinstance(x, int | float) and math.isfinite(x) and x > 0:
            by.setdefault(int(r["batch_size"]), []).append(float(x))
    return {b: median(xs) for b, xs in sorted(by.items())}


@dataclass(frozen=True)
class FastestToTarget:
    """The goodput pick of one model (None where not predicted, with `why`), its B_noise."""

    pick: goodput.GoodputPick | None
    noise: NoiseEstimate | None
    why: str | None = None

    def line(self) -> str:
        """The verdict's words, quoting the figures `to_dict` holds."""
        p, n = self.pick, self.noise
        if p is None or n is None:
            return self.why or "not predicted"
        interval = "" if n.low is None or n.high is None else f"{span(n.low, n.high)}, "
        text = f"predicted from B_noise ≈ {number(n.b_noise)} ({interval}{n.kind}; {n.where})"
        text += f" and this sweep's samples/s: B={p.batch}"
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
        throughput-fastest batch, b_noise with its interval and kind, where it was taken; or
        batch None and `why`."""
        p, n = self.pick, self.noise
        if p is None or n is None:
            return {"batch": None, "predicted": None, "why": self.why, "text": self.line()}
        return {
            "batch": p.batch,
            "predicted": "predicted",
            "throughput_batch": p.throughput_batch,
            "gain": p.gain,
            "holds": p.holds,
            "b_noise": n.b_noise,
            "interval": None if n.low is None else [n.low, None if n.high == math.inf else n.high],
            "kind": n.kind,
            "where": n.where,
            "text": self.line(),
        }


def answer(
    samples_per_s: Mapping[int, float], noise: NoiseEstimate | None, model: str
) -> FastestToTarget:
    """The goodput pick over the measured `samples_per_s` (batch -> samples/s) at `noise`'s
    B_noise and interval ends; not predicted (with why) where there is no B_noise or no
    measured batch."""
    if noise is None:
        return FastestToTarget(None, None, NOT_PREDICTED.format(model=model))
    if not samples_per_s:
        return FastestToTarget(None, noise, "not predicted (no batch's samples/s measured)")
    low, high = noise.low, noise.high
    if low is None or high is None or not low <= noise.b_noise <= high:
        low = high = None
    return FastestToTarget(goodput.pick(samples_per_s, noise.b_noise, low, high), noise)
