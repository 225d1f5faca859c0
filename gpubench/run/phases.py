"""Where a sweep's wall time goes: the phases run_sweep passes through (model checks,
calibration, points, confirmation) and each point's share of the parent's time, kept in the
run folder as phases.json so that a benchmark (scripts/sweep_phases.py) reads a real run's
timings rather than timing a copy of it.

Timestamps are the host's epoch clock (time.time(), seconds), so a caller outside the sweep
(the command that launched it, the report file's modification time) can be set against them.
phases.json describes the latest invocation only: a resumed sweep writes its own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from gpubench.config.spec import Point
from gpubench.store.phases_record import REPORT_PHASE as REPORT_PHASE
from gpubench.store.phases_record import Phase, PhasesRecord, PointTime, read


class PhaseLog:
    """The phases and points of one run_sweep call, written to `run_dir`/phases.json whenever
    one ends (from the moment the folder exists: phases before it are held until then)."""

    def __init__(self) -> None:
        self.started = time.time()
        self.phases: list[Phase] = []
        self.points: list[PointTime] = []
        self._dir: Path | None = None

    def attach(self, run_dir: Path) -> None:
        """Write to `run_dir` from now on (the folder exists and is locked by this sweep)."""
        self._dir = run_dir
        self.write()

    @contextlib.contextmanager
    def phase(self, name: str, announce: bool = False) -> Iterator[None]:
        """Record the block as phase `name` (its start and end, also when it raises). With
        `announce`, phases.json holds it from its start (ending there until it ends): a folder
        whose process was killed within it shows that it began."""
        start = time.time()
        if announce and self._dir is not None:
            begun = (*self.phases, Phase(name, start, start))
            PhasesRecord(self.started, begun, tuple(self.points)).write(self._dir)
        try:
            yield
        finally:
            self.phases.append(Phase(name, start, time.time()))
            self.write()

    def point(self, key: str, start: float, ended: float, written: float, worker_s: float) -> None:
        """A point measured from `start` to `ended` (its row back in the parent), its row
        written (and shown) by `written`, `worker_s` of that spent starting a worker."""
        self.points.append(PointTime(key, start, ended, written, worker_s))

    def write(self) -> None:
        """phases.json as recorded so far, once attached (store.phases_record)."""
        if self._dir is not None:
            PhasesRecord(self.started, tuple(self.phases), tuple(self.points)).write(self._dir)


def add_phase(run_dir: Path, name: str, start: float, end: float) -> None:
    """Append phase `name` to `run_dir`'s phases.json: a phase the command runs after run_sweep
    returned (the summary and report). A folder without phases.json is left as it is."""
    record = read(run_dir)
    if record is None:
        return
    phases = (*record.phases, Phase(name, start, end))
    PhasesRecord(record.started, phases, record.points).write(run_dir)


def point_name(point: Point) -> str:
    """A point as phases.json names it: model, device, precision, optimizer and batch size."""
    return f"{point.model} {point.device} {point.precision} {point.optimizer} B={point.batch_size}"
