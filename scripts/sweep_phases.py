"""Where the default sweep's time goes: runs `python -m gpubench sweep --quiet` (or the sweep
arguments given after --) into a fresh folder and prints each phase's seconds and share, with
the load average before and after. With --from DIR it reads a run folder already made (no
start-up or exit figures then). The figures come from the run's own phases.json and rows
(gpubench.run.phases records them); this script launches, splits them and prints.

    python scripts/sweep_phases.py                  # the default sweep, timed
    python scripts/sweep_phases.py -- --no-confirm   # extra sweep flags after --
    python scripts/sweep_phases.py --from results/20261124-120000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gpubench.config.spec import Point
from gpubench.run import phases
from gpubench.store import phases_record
from gpubench.store.results import read_rows

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
    data = phases_record.read(run_dir)
    if data is None:
        raise SystemExit(f"no {phases_record.FILE} in {str(run_dir)!r}: its sweep wrote none")
    out: list[tuple[str, float]] = []
    if launched is not None:
        out.append(("start-up (interpreter, imports, parse)", data.started - launched))
    rows = {phases.point_name(Point.of(r)): r for r in read_rows(run_dir)}
    for p in data.phases:
        out.append((p.phase, p.end - p.start))
        if p.phase == "points":
            out.extend((f"  {name}", s) for name, s in _point_parts(data, rows, p))
    if ended is not None:
        out.append(("verdict and exit", ended - max(p.end for p in data.phases)))
    return out


def _point_parts(
    data: phases_record.PhasesRecord,
    rows: dict[str, dict[str, Any]],
    points_phase: phases_record.Phase,
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="run_dir", type=Path, help="read this run folder instead")
    ap.add_argument("--out", type=Path, help="run folder to create (default: a temporary one)")
    ap.add_argument("sweep_args", nargs="*", help="further `gpubench sweep` arguments, after --")
    args = ap.parse_args()
    if args.run_dir is not None:
        print(table(breakdown(args.run_dir)))
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="sweep-phases-")) / "run"
    command = [sys.executable, "-m", "gpubench", "sweep", "--quiet", "--out", str(out)]
    command += args.sweep_args
    load_before = os.getloadavg()
    launched = time.time()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, check=False)
    ended = time.time()
    load_after = os.getloadavg()
    if done.returncode not in (0, 1):
        print(f"the sweep exited with status {done.returncode}", file=sys.stderr)
        return done.returncode
    print(f"$ {' '.join(command[1:])}  ->  {out}")
    print(table(breakdown(out, launched, ended)))
    print(
        f"wall clock {ended - launched:.1f} s; load average (1 min) {load_before[0]:.2f} "
        f"before, {load_after[0]:.2f} after; {os.cpu_count()} cores"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
