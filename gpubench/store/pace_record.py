"""How fast a run went (issue 53): its wall time and the points it measured per minute, for a
device pool's or a launch's speedup to be seen. A sweep's pace is read from its phases.json
(store.phases_record: from its start to its last phase, the report's left out); a launch's
merged folder (run.launcher) holds pace.json, written by `collect`, from the first submission
of its shards' jobs to the last row written in them.

```
{"wall_s": seconds, "points": int, "since": "what the wall time is counted from"}
```
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpubench.store import phases_record
from gpubench.store.typed_json import Record
from gpubench.store.wording import number, plural, seconds

FILE = "pace.json"


@dataclass(frozen=True)
class Pace(Record):
    """`points` measured in `wall_s` seconds of wall time, counted from `since`."""

    FILE = FILE
    WHAT = "a pace record"

    wall_s: float
    points: int
    since: str = "the sweep's start"

    def per_minute(self) -> float | None:
        """Points per minute of wall time (None for no wall time)."""
        return self.points * 60.0 / self.wall_s if self.wall_s > 0 else None

    def line(self) -> str:
        """'wall time 75.3 s (from the sweep's start): 4 points, 3.19 per minute'."""
        rate = self.per_minute()
        each = f", {number(rate)} per minute" if rate is not None else ""
        return (
            f"wall time {seconds(self.wall_s)} (from {self.since}): "
            f"{plural(self.points, 'point')}{each}"
        )


def of_folder(run_dir: str | Path) -> Pace | None:
    """`run_dir`'s pace: its pace.json where it has one (a launch's merge), else its sweep's
    from phases.json; None where neither says (no phases.json, or no point measured in it).
    phases.json describes the latest invocation only: a resumed sweep's pace is its own."""
    kept = Pace.read(run_dir)
    if kept is not None:
        return kept
    record = phases_record.read(Path(run_dir))
    if record is None or not record.points:
        return None
    ends = [p.end for p in record.phases if p.phase != phases_record.REPORT_PHASE]
    ends += [p.written for p in record.points]
    return Pace(max(ends) - record.started, len(record.points))
