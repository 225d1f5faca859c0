"""A run folder's phases.json: where the latest sweep invocation's wall time went (run.phases
records it, scripts/sweep_phases.py and run.phases.breakdown read it), with its writer and
reader. Times are the host's epoch clock (time.time(), seconds).

```
{"started": when run_sweep began,
 "phases": [{"phase": name, "start": s, "end": s}],
 "points": [{"point": run.phases.point_name, "start": s, "end": s (its row back in the
             parent), "written": s (its row written and shown), "worker_s": seconds of it
             spent starting a worker}]}
```
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from gpubench.store import typed_json
from gpubench.store.results import replace_durably

FILE = "phases.json"


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
class PhasesRecord:
    """The whole of phases.json."""

    started: float
    phases: tuple[Phase, ...] = ()
    points: tuple[PointTime, ...] = ()

    def write(self, run_dir: Path) -> Path:
        """phases.json in `run_dir`, written whole and durably (a reader never sees half a
        file; a crash leaves the old one)."""
        text = json.dumps(dataclasses.asdict(self), indent=1) + "\n"
        return replace_durably(Path(run_dir) / FILE, text)


def read(run_dir: str | Path) -> PhasesRecord | None:
    """`run_dir`'s phases.json (None where the sweep that made it wrote none);
    typed_json.RecordError (one line: the file and what is wrong) where it is not what
    run.phases writes."""
    return typed_json.read_in(run_dir, FILE, PhasesRecord, "a phases record")
