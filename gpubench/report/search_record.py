"""tune.json (gpubench.tune.trajectory) read for the report. Only `trials` is required; every
other key may be absent (an old or half-written file) and then reads as not recorded (None)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


def num(value: Any) -> float | None:
    """A finite number, or None (a null, a string, a bool, NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def whole(value: Any) -> int | None:
    """A whole number, or None."""
    v = num(value)
    return None if v is None else int(v)


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


@dataclass(frozen=True)
class Trial:
    """One measurement (outcome: kept, pruned, final, failed or open); times in seconds since
    the tune started, None where not recorded (samples_per_s None: no figure)."""

    number: int
    round: int
    config: dict[str, Any]
    samples_per_s: float | None
    status: str
    outcome: str
    end_s: float | None
    took_s: float | None
    compile_s: float | None
    best_so_far: float | None

    @property
    def start_s(self) -> float | None:
        """The wall second it started at (its end less what it took), or None."""
        if self.end_s is None or self.took_s is None:
            return None
        return max(0.0, self.end_s - self.took_s)


@dataclass(frozen=True)
class Round:
    """One round of the search as tune.json records it (counts None where not recorded)."""

    number: int
    budget_s: float | None
    measured: int | None
    kept: int | None
    pruned: int | None
    failed: int | None
    final: int | None
    open: int | None
    ended_at_s: float | None

    @property
    def decided(self) -> bool:
        """Whether its survivors were chosen: it measured something and left nothing open."""
        return bool(self.measured) and self.open == 0 and self.ended_at_s is not None


@dataclass(frozen=True)
class SpeedSearch:
    """What the report says of one tune.json."""

    model: str
    device: str
    request: dict[str, Any]  # what the user asked: model, size, optimizer, ... ({}: none)
    budget_s: float | None
    elapsed_s: float | None
    finished: bool | None
    stopped: str | None
    rounds_decided: int | None
    coverage: dict[str, Any]
    best: dict[str, Any] | None
    rounds: list[Round]
    trials: list[Trial]  # by the wall second they ended (unplaced ones last, by number)
    verdict: dict[str, Any] | None  # the tune's own record of its confirmation's verdict
    answer: dict[str, Any] | None  # an `answer` key, where a newer schema writes one

    @property
    def placed(self) -> list[Trial]:
        """The trials with a recorded end, in the order they ended."""
        return [t for t in self.trials if t.end_s is not None]

    def varying(self) -> list[str]:
        """The config keys worth printing: those whose values differ between trials, and the
        batch size."""
        keys: dict[str, set[str]] = {}
        for t in self.trials:
            for k, v in t.config.items():
                keys.setdefault(k, set()).add(repr(v))
        # the batch always: with a fixed effective batch it names what the micro-batches add to
        many = [k for k, vs in keys.items() if len(vs) > 1 or k == "batch_size"]
        return many or list(keys)

    def label(self, config: Any) -> str:
        """A configuration as 'key=value' pairs of the keys that vary, in the file's order."""
        if not isinstance(config, dict):
            return str(config)
        shown = self.varying()
        return " ".join(f"{k}={v}" for k, v in config.items() if k in shown) or "(one setting)"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dict_or_none(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _trial(i: int, t: dict[str, Any]) -> Trial:
    number = whole(t.get("number"))
    return Trial(
        number=i if number is None else number,
        round=whole(t.get("round")) or 0,
        config=_dict(t.get("config")),
        samples_per_s=num(t.get("samples_per_s")),
        status=str(t.get("status") or ""),
        outcome=str(t.get("outcome") or ""),
        end_s=num(t.get("elapsed_s")),
        took_s=num(t.get("point_time_s")),
        compile_s=num(t.get("compile_time_s")),
        best_so_far=num(t.get("best_so_far_samples_per_s")),
    )


def _round(r: dict[str, Any]) -> Round:
    counts = {k: whole(r.get(k)) for k in ("measured", "kept", "pruned", "failed", "final", "open")}
    return Round(
        number=whole(r.get("round")) or 0,
        budget_s=num(r.get("budget_s")),
        ended_at_s=num(r.get("ended_at_s")),
        **counts,
    )


def parse(record: dict[str, Any]) -> SpeedSearch:
    """The search `record` (tune.json's object) holds. Raises ValueError when it has no list of
    trials; every other key is optional."""
    raw = record.get("trials")
    if not isinstance(raw, list):
        raise ValueError("tune.json has no list of trials")
    trials = [_trial(i, t) for i, t in enumerate(raw) if isinstance(t, dict)]
    trials.sort(key=lambda t: (t.end_s is None, t.end_s or 0.0, t.number))
    request = _dict(record.get("request"))
    model = "/".join(str(request[k]) for k in ("model", "size") if request.get(k))
    finished = record.get("finished")
    stopped = record.get("stopped")
    return SpeedSearch(
        model=model,
        device=str(request.get("device") or ""),
        request=request,
        budget_s=num(request.get("budget_s")),
        elapsed_s=num(record.get("elapsed_s")),
        finished=finished if isinstance(finished, bool) else None,
        stopped=str(stopped) if stopped else None,
        rounds_decided=whole(record.get("rounds_decided")),
        coverage=_dict(record.get("coverage")),
        best=_dict_or_none(record.get("best")),
        rounds=sorted(
            (_round(r) for r in record.get("rounds") or [] if isinstance(r, dict)),
            key=lambda r: r.number,
        ),
        trials=trials,
        verdict=_dict_or_none(record.get("verdict")),
        answer=_dict_or_none(record.get("answer")),
    )


def best_so_far(trials: list[Trial]) -> list[float | None]:
    """Per trial (in the order given), the best samples/s measured up to and including it: the
    file's figure where it gives one, else the running maximum of the trials' own."""
    out: list[float | None] = []
    best: float | None = None
    for t in trials:
        if t.best_so_far is not None:
            best = t.best_so_far
        elif t.samples_per_s is not None and (best is None or t.samples_per_s > best):
            best = t.samples_per_s
        out.append(best)
    return out
