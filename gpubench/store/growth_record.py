"""A run folder's growth.json: where and why each batch-size series of a sweep stopped (the growth
rule, science.growth), and the points the sweep planned and did not measure, with its writer
(run.sweep) and reader (the verdict and the report: what was planned and not reached).

```
{"stops": [{"series": Point.to_dict() but batch_size, "reason": growth.Growth.reason,
            "detail": words, "next_batch": int|null}],
 "unmeasured": [{"point": Point.to_dict(), "reason": "stopped" | "over budget" | "emulated",
                 "detail": words}]}
```
A series is named by its settings (config.keys.series_key: its points' identity but the batch
size), so two seeds of one series are two entries. A growth.json written before issue 49 keyed
each series by its label instead (`"series": {label: {"reason", "detail", "next_batch"}}`, the
seed left out); it still reads, its stops found by the series' label (`by_series`).

"stopped": the sweep was stopped (Ctrl-C, SIGTERM, --max-time) before it reached the point;
"over budget": a listed batch of a growing series that its series' time budget could not hold
(the growth rule's prediction of its time over what the budget had left), so it was not started;
"emulated": a precision its device only emulates, left out where the suite says so
(`skip_emulated`, the default sweep: bf16 on a CPU without bf16 instructions).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from gpubench.config.keys import Key, series_key
from gpubench.store.typed_json import Record

FILE = "growth.json"
REASONS = ("stopped", "over budget", "emulated")


@dataclass(frozen=True)
class Stop:
    """One series' last growth decision: `reason` (science.growth.Growth.reason), `detail` (its
    figures in words), `next_batch` (the batch it would measure next; null: it stopped) and
    `series` (its points' settings but the batch size; {} in a growth.json before issue 49,
    where the series' label names it)."""

    reason: str
    detail: str
    next_batch: int | None = None
    series: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Unmeasured:
    """A point the sweep planned and did not measure: `point` (Point.to_dict), `reason` (one of
    REASONS) and `detail` (why, in words)."""

    point: dict[str, Any]
    reason: str
    detail: str = ""

    def __post_init__(self) -> None:
        if self.reason not in REASONS:
            raise ValueError(f"reason {self.reason!r} is none of {', '.join(REASONS)}")


@dataclass(frozen=True)
class GrowthRecord(Record):
    """The whole of growth.json: `stops`, one per grown series; `unmeasured`; and `series`, the
    stops of a growth.json written before issue 49 by the series' label (read, kept on a
    resume, never written otherwise)."""

    stops: tuple[Stop, ...] = ()
    unmeasured: tuple[Unmeasured, ...] = ()
    FILE = FILE
    WHAT = "a growth record"

    series: dict[str, Stop] = field(default_factory=dict)

    def __post_init__(self) -> None:
        keys = [series_key(s.series) for s in self.stops]
        if len(set(keys)) < len(keys):
            raise ValueError("two stops name one series")

    def by_series(self) -> dict[Key | str, Stop]:
        """Each stop by its series' key (config.keys.series_key), and an old file's by the
        series' label: a row's stop is the entry of its series_key, else of its series' label
        (Point.label(batch=False))."""
        return {**self.series, **{series_key(s.series): s for s in self.stops}}

    def to_dict(self) -> dict[str, Any]:
        """growth.json's object: `series` only where it holds an old file's stops."""
        data = dataclasses.asdict(self)
        if not self.series:
            del data["series"]
        return data


read = GrowthRecord.read
