"""A run folder's growth.json: where and why each batch-size series of a sweep stopped (the growth
rule, science.growth), and the points the sweep planned and did not measure, with its writer
(run.sweep) and reader (the verdict and the report: what was planned and not reached).

```
{"series": {label: {"reason": growth.Growth.reason, "detail": words, "next_batch": int|null}},
 "unmeasured": [{"point": Point.to_dict(), "reason": "stopped" | "over budget" | "emulated",
                 "detail": words}]}
```

"stopped": the sweep was stopped (Ctrl-C, SIGTERM, --max-time) before it reached the point;
"over budget": a listed batch of a growing series that its series' time budget could not hold
(the growth rule's prediction of its time over what the budget had left), so it was not started;
"emulated": a precision its device only emulates, left out where the suite says so
(`skip_emulated`, the default sweep: bf16 on a CPU without bf16 instructions).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench.store import typed_json
from gpubench.store.results import ResultStore

FILE = "growth.json"
REASONS = ("stopped", "over budget", "emulated")


@dataclass(frozen=True)
class Stop:
    """One series' last growth decision: `reason` (science.growth.Growth.reason), `detail` (its
    figures in words) and `next_batch` (the batch it would measure next; null: it stopped)."""

    reason: str
    detail: str
    next_batch: int | None = None


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
class GrowthRecord:
    """The whole of growth.json."""

    series: dict[str, Stop] = field(default_factory=dict)
    unmeasured: tuple[Unmeasured, ...] = ()

    def write(self, run_dir: Path) -> Path:
        """growth.json in `run_dir`, written whole and durably."""
        return ResultStore(run_dir).write_json(FILE, dataclasses.asdict(self))


def read(run_dir: str | Path) -> GrowthRecord | None:
    """`run_dir`'s growth.json (None where it has none); typed_json.RecordError (one line: the
    file and what is wrong) where it is not what run.sweep writes."""
    return typed_json.read_in(run_dir, FILE, GrowthRecord, "a growth record")
