"""A folder's ab.json: what `gpubench compare --ab BASE_REF` measured and how it judged it, with
its writer (run.ab) and reader (`read`), so the gate's answer can be read again (and judged at
another margin from its rounds).

```
{"base_ref": as given, "base_commit": sha, "head_commit": sha, "head_changed": bool (uncommitted
 changes measured), "margin": share, "rounds": int, "window_s": s, "windows": per process,
 "seconds": the whole gate, "base_gpubench", "head_gpubench": the gpubench/__init__.py each
 version's processes imported, "other_load_cores": most seen, "busy": any round contended,
 "points": [{"point": Point.to_dict(), "base_samples_per_s": [per round], "head_samples_per_s":
 [per round], "ratio", "low", "high": head/base median and 95% interval, "reading"}]}
```
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpubench.store.typed_json import Record

FILE = "ab.json"


@dataclass(frozen=True)
class ABPoint:
    """One point: each version's samples/s per round (round r of both measured in the same
    seconds, each in a fresh process), and science.regression's judgement of their ratio."""

    point: dict[str, Any]
    base_samples_per_s: list[float]
    head_samples_per_s: list[float]
    ratio: float
    low: float
    high: float
    reading: str

    @property
    def fails(self) -> bool:
        return self.reading == "slower"


@dataclass(frozen=True)
class ABRecord(Record):
    """The whole of ab.json (see the module docstring)."""

    FILE = FILE
    WHAT = "an A/B gate record"

    base_ref: str
    base_commit: str
    head_commit: str
    head_changed: bool
    margin: float
    rounds: int
    window_s: float
    windows: int
    seconds: float
    base_gpubench: str
    head_gpubench: str
    points: list[ABPoint]
    other_load_cores: float | None = None
    busy: bool | None = None

    @property
    def failed(self) -> list[ABPoint]:
        """The points the head runs slower than the base beyond the margin."""
        return [p for p in self.points if p.fails]

    def exit_code(self) -> int:
        """The gate's answer: 1 where a point is slower beyond the margin, or where no point
        was measured (a gate never passes on nothing); else 0."""
        return 1 if self.failed or not self.points else 0


read = ABRecord.read
