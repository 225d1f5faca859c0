"""What the report's search section says of a search's record (tune.json: gpubench.store.
tune_record; tune_target.json: store.target_record): its seconds and times, and the speed
search's trials as the report shows them."""

from __future__ import annotations

import math
from typing import Any

from gpubench.config import labels
from gpubench.store.tune_record import RoundRecord, TrialRecord, TuneRecord


def seconds(value: float | None) -> str:
    """'0.373 s', '12.3 s', '225 s', '1,234 s'; 'not recorded' for None."""
    if value is None:
        return "not recorded"
    return f"{value:,.3g} s" if abs(value) < 100 else f"{value:,.0f} s"


def time_spent(elapsed: float | None, budget: float | None) -> str:
    """'Time: 30 s in all against a budget of 40 s (10 s to spare)', as far as recorded."""
    text = f"Time: {seconds(elapsed)} in all"
    if budget is not None:
        text += f" against a budget of {seconds(budget)}"
        if elapsed is not None:
            spare = "over" if elapsed > budget else "to spare"
            text += f" ({seconds(abs(elapsed - budget))} {spare})"
    return text


def budget_s(s: TuneRecord) -> float | None:
    """The wall-clock budget the tune was given (None: none, or not a finite number)."""
    b = s.request.get("budget_s")  # the request is a plain dict
    if isinstance(b, bool) or not isinstance(b, int | float) or not math.isfinite(b):
        return None
    return float(b)


def in_order(s: TuneRecord) -> list[TrialRecord]:
    """The trials in the order they ended."""
    return sorted(s.trials, key=lambda t: (t.elapsed_s, t.number))


def start_s(t: TrialRecord) -> float | None:
    """The wall second a trial started at (its end less its whole cost), or None."""
    return None if t.point_time_s is None else max(0.0, t.elapsed_s - t.point_time_s)


def decided(r: RoundRecord) -> bool:
    """Whether a round's survivors were chosen: it measured something and left nothing open."""
    return bool(r.measured) and r.open == 0 and r.ended_at_s is not None


def varying(s: TuneRecord) -> list[str]:
    """The config keys worth printing: those whose values differ between trials (the one
    labeler's `varying`), and the batch size."""
    keys = list(dict.fromkeys(k for t in s.trials for k in t.config))
    among = labels.varying([t.config for t in s.trials], keys)
    # the batch always: with a fixed effective batch it names what the micro-batches add to
    return [k for k in keys if k in among or k == "batch_size"] or keys


def label(s: TuneRecord, config: Any) -> str:
    """A configuration as 'key=value' pairs of the keys that vary, in the file's order."""
    if not isinstance(config, dict):
        return str(config)
    shown = varying(s)
    return " ".join(f"{k}={v}" for k, v in config.items() if k in shown) or "(one setting)"


def best_so_far(trials: list[TrialRecord]) -> list[float | None]:
    """Per trial (in the order given), the best samples/s measured up to and including it: the
    file's figure where it gives one, else the running maximum of the trials' own."""
    out: list[float | None] = []
    best: float | None = None
    for t in trials:
        if t.best_so_far_samples_per_s is not None:
            best = t.best_so_far_samples_per_s
        elif t.samples_per_s is not None and (best is None or t.samples_per_s > best):
            best = t.samples_per_s
        out.append(best)
    return out
