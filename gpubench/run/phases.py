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
from typing import Any

from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.store.phases_record import FILE, Phase, PhasesRecord, PointTime, read


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
    def phase(self, name: str) -> Iterator[None]:
        """Record the block as phase `name` (its start and end, also when it raises)."""
        start = time.time()
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


REPORT_PHASE = "summary and report (HTML, PNG charts)"


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


# The parts of the points phase, in the order the table shows them.
POINT_PARTS = (
    "worker start (fork, imports)",
    "build, counting step, probes, profile analysis, row",
    "warm-up (counting step included)",
    "measuring windows",
    "profiled steps",
    "hand-off (load check, gc, transfer)",
    "row write and progress line",
    "between points",
)


def breakdown(
    run_dir: Path, launched: float | None = None, ended: float | None = None
) -> list[tuple[str, float]]:
    """Seconds per phase of the sweep in `run_dir`, in order, from its phases.json and rows:
    start-up (from `launched`, the epoch time its command started, to run_sweep's start),
    each recorded phase (the summary and report among them, as the command recorded it), the
    points phase split into POINT_PARTS (indented by two spaces), and the exit (to `ended`).
    Parts whose bounds are unknown (no `launched`, no `ended`) are left out."""
    from gpubench.store.results import read_rows

    data = read(run_dir)
    if data is None:
        raise ConfigError(f"no {FILE} in {str(run_dir)!r}: the sweep that made it wrote none")
    out: list[tuple[str, float]] = []
    if launched is not None:
        out.append(("start-up (interpreter, imports, parse)", data.started - launched))
    rows = {point_name(Point.of(r)): r for r in read_rows(run_dir)}
    for p in data.phases:
        out.append((p.phase, p.end - p.start))
        if p.phase == "points":
            out.extend((f"  {name}", s) for name, s in _point_parts(data, rows, p))
    if ended is not None:
        out.append(("verdict and exit", ended - max(p.end for p in data.phases)))
    return out


def _point_parts(
    data: PhasesRecord, rows: dict[str, dict[str, Any]], points_phase: Phase
) -> list[tuple[str, float]]:
    """The points phase's seconds split into POINT_PARTS: the parent's timestamps around each
    point, and the row's own timing columns for what happened inside the worker."""
    parts = dict.fromkeys(POINT_PARTS, 0.0)
    accounted = 0.0
    for p in data.points:
        row = rows.get(p.point, {})
        inside = float(row.get("point_time_s") or 0.0)
        warm = float(row.get("warmup_time_s") or 0.0)
        windows = float(row.get("wall_time_s") or 0.0)
        found = row.get("profile")
        profile: dict[str, Any] = found if isinstance(found, dict) else {}
        profiled = float(row.get("profile_step_time_s") or 0.0) * int(profile.get("steps") or 0)
        parts["worker start (fork, imports)"] += p.worker_s
        parts["warm-up (counting step included)"] += warm
        parts["measuring windows"] += windows
        parts["profiled steps"] += profiled
        parts["build, counting step, probes, profile analysis, row"] += max(
            0.0, inside - warm - windows - profiled
        )
        parts["hand-off (load check, gc, transfer)"] += max(
            0.0, p.end - p.start - p.worker_s - inside
        )
        parts["row write and progress line"] += p.written - p.end
        accounted += p.written - p.start
    span = points_phase.end - points_phase.start
    parts["between points"] = max(0.0, span - accounted)
    return list(parts.items())


def table(parts: list[tuple[str, float]]) -> str:
    """`parts` (breakdown's) as a text table of seconds and share of the total (the top-level
    phases' sum; an indented part's share is of that total too)."""
    total = sum(s for name, s in parts if not name.startswith(" "))
    width = max(len(name) for name, _ in parts) + 2
    lines = [f"{'phase':<{width}}{'seconds':>9}{'share':>8}"]
    for name, s in parts:
        share = s / total if total > 0 else 0.0
        lines.append(f"{name:<{width}}{s:>9.2f}{share:>8.1%}")
    lines.append(f"{'total':<{width}}{total:>9.2f}{1:>8.0%}")
    return "\n".join(lines)
