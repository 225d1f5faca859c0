"""A run folder's phases.json: where the latest sweep invocation's wall time went (run.phases
records it, scripts/sweep_phases.py reads it), with its writer and reader. Times are the
host's epoch clock (time.time(), seconds).

```
{"started": when run_sweep began,
 "phases": [{"phase": name, "start": s, "end": s}],
 "points": [{"point": run.phases.point_name, "start": s, "end": s (its row back in the
             parent), "written": s (its row written and shown), "worker_s": seconds of it
             spent starting a worker}]}
```
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from gpubench.store.results import replace_durably
from gpubench.store.typed_json import Record

FILE = "phases.json"

# The phase the sweep command appends after run_sweep returned (run.phases.add_phase)
REPORT_PHASE = "summary and report (HTML, PNG charts)"


@dataclass(frozen=True)
class Phase:
    """One phase, named `phase`, from `start` to `end`."""

    phase: str
    start: float
    end: float


@dataclass(frozen=True)
class PointTime:
    """One point's times in the parent (the module docstring)."""

    point: str
    start: float
    end: float
    written: float
    worker_s: float


@dataclass(frozen=True)
class PhasesRecord(Record):
    """The whole of phases.json."""

    FILE = FILE
    WHAT = "a phases record"

    started: float
    phases: tuple[Phase, ...] = ()
    points: tuple[PointTime, ...] = ()

    def write(self, run_dir: Path) -> Path:
        """phases.json in `run_dir`, written whole and durably (a reader never sees half a
        file; a crash leaves the old one)."""
        text = json.dumps(self.to_dict(), indent=1) + "\n"
        return replace_durably(Path(run_dir) / FILE, text)


read = PhasesRecord.read
