"""A folder's ab.json: what `gpubench compare --ab BASE_REF` measured and how it judged it, with
its writers (run.ab for points, run.ab_pytest for pytest-benchmark tests) and reader (`read`),
so the gate's answer can be read again (and judged at another margin from its rounds).

```
{"base_ref": as given, "base_commit": sha, "head_commit": sha, "head_changed": bool (uncommitted
 changes measured), "margin": share, "rounds": int, "window_s": s, "windows": per process,
 "seconds": the whole gate, "base_gpubench", "head_gpubench": the gpubench/__init__.py each
 version's processes imported, "other_load_cores": most seen, "busy": any round contended,
 "points": [{"point": Point.to_dict(), or {"benchmark": a pytest-benchmark test's full name,
 "unit": "samples/s" (the gpubench fixture's) or "calls/s" (1 / the median time of a call of a
 plain benchmark)}, "base_samples_per_s": [per round, in the unit], "head_samples_per_s": [per
 round], "ratio", "low", "high": head/base median and 95% interval, "reading"}],
 "pytest": the tests selected (--pytest; null for points), "unmatched": benchmarks that ran in
 one version only (not compared)}
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpubench.store.typed_json import Record

FILE = "ab.json"
BENCHMARK = "benchmark"  # a point's key that names a pytest-benchmark test (--pytest)


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

    @property
    def benchmark(self) -> str | None:
        """The pytest-benchmark test's full name where the point is one (None for a Point)."""
        name = self.point.get(BENCHMARK)
        return None if name is None else str(name)


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
    window_s: float | None
    windows: int
    seconds: float
    base_gpubench: str
    head_gpubench: str
    points: list[ABPoint]
    other_load_cores: float | None = None
    busy: bool | None = None
    pytest: list[str] | None = None
    unmatched: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[ABPoint]:
        """The points the head runs slower than the base beyond the margin."""
        return [p for p in self.points if p.fails]

    def exit_code(self) -> int:
        """The gate's answer: 1 where a point is slower beyond the margin, or where no point
        was measured (a gate never passes on nothing); else 0."""
        return 1 if self.failed or not self.points else 0


read = ABRecord.read
