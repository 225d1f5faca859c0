"""A convergence run's learning curve: when to evaluate, and when a quality target was met."""

from __future__ import annotations

import math
from typing import Any

# Whether a higher value of each target metric is better.
HIGHER_IS_BETTER = {"eval_accuracy": True, "eval_loss": False}


def next_eval_step(step: int, every: int, rel_gap: float) -> int:
    """The step of the evaluation after one at `step`: gaps of at most `every` steps and, where
    `rel_gap` > 0, at most `rel_gap` times the steps done (at least 1), so an event between two
    evaluations is located to within that fraction of the steps it took."""
    gap = every if rel_gap <= 0 else max(1, min(every, math.floor(rel_gap * step)))
    return step + gap


def meets(value: float | None, metric: str, target: float) -> bool:
    """Whether `value` of `metric` reaches `target` (at or above for accuracy, at or below for
    loss). A missing or non-finite value never does."""
    if value is None or not math.isfinite(value):
        return False
    return value >= target if HIGHER_IS_BETTER[metric] else value <= target


def first_reaching(
    curve: list[dict[str, Any]], metric: str, target: float
) -> dict[str, Any] | None:
    """The first entry of `curve` (in step order) whose `metric` meets `target`, or None."""
    for entry in sorted(curve, key=lambda e: e["step"]):
        if meets(entry.get(metric), metric, target):
            return entry
    return None


def spread(values: list[float]) -> dict[str, float | int | None]:
    """n, mean, sample standard deviation (None for one value), min and max of `values`."""
    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "std": None, "min": None, "max": None}
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None
    return {"n": n, "mean": mean, "std": std, "min": min(values), "max": max(values)}
