"""Is the machine busy? The cores other processes kept busy while gpubench measured (the machine's
busy CPU time from `/proc/stat` less gpubench's own process tree, probes.process_tree, over the
window's wall time; None where unknown, never 0), the load average, and the spread of the matmul
calibration: a contended figure must not be read as the machine's speed. A point is contended
when that load does not fit in the cores its own threads leave free (`contended`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpubench.probes import process_tree
from gpubench.probes.probe import Probe

# Others' load beyond the cores a point leaves free, by more than this, makes it contended (a
# point on every core slows as soon as one thread waits; clock ticks read up to ~0.1 core off).
SPARE_CORES = 0.25
# The load average before a sweep, per core, from which the machine counts as busy.
BUSY_LOAD_PER_CORE = 0.5
# The matmul calibration's rounds differing by more than this (max / min - 1) on the CPU.
BUSY_CALIBRATION_SPREAD = 0.15
# Windows shorter than this read too coarsely (10 ms clock ticks) to say anything.
_MIN_WINDOW_S = 0.05
_STAT = Path("/proc/stat")


def cores() -> int:
    """The machine's logical CPUs (what /proc/stat and the load average count)."""
    return os.cpu_count() or 1


def load_average_1m() -> float | None:
    """The 1-minute load average (runnable tasks), or None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _machine_busy_s() -> float | None:
    """Seconds of CPU time the whole machine has spent busy since boot (all cores)."""
    try:
        fields = _STAT.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    # cpu user nice system idle iowait irq softirq steal ...: busy is all but idle and iowait
    ticks = [int(v) for v in fields[1:9]]
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


class OtherLoad(Probe):
    """`cores`: the mean cores processes outside gpubench's tree kept busy in the block;
    `own_cores`: the tree's (this process included); `wall_s`: the block's seconds. Cores are
    None where unknown, or the window was too short to tell."""

    def __init__(self) -> None:
        self.cores: float | None = None
        self.own_cores: float | None = None
        self.wall_s: float | None = None
        self._start: tuple[float, float | None, float] | None = None

    def start(self) -> None:
        self._start = (time.perf_counter(), _machine_busy_s(), process_tree.tree_cpu_s())

    def lengthen(self) -> None:
        """Wait until the window is long enough (_MIN_WINDOW_S) to tell its load, so that a
        point whose steps were too short for the clock's ticks still gets the check."""
        assert self._start is not None
        left = _MIN_WINDOW_S - (time.perf_counter() - self._start[0])
        if left > 0:
            time.sleep(left)

    def stop(self, failed: bool = False) -> None:
        assert self._start is not None
        wall0, busy0, own0 = self._start
        wall, busy = time.perf_counter() - wall0, _machine_busy_s()
        own = process_tree.tree_cpu_s() - own0
        self.wall_s = wall
        if wall < _MIN_WINDOW_S:
            return
        self.own_cores = max(0.0, own / wall)
        if busy is None or busy0 is None:
            return
        self.cores = max(0.0, (busy - busy0 - own) / wall)


def needed_cores(device: str, threads: int) -> int:
    """The cores a point keeps busy: its `threads` on the CPU, one on a GPU (the host thread
    that launches kernels; intra-op threads idle meanwhile)."""
    return 1 if device.split(":")[0] == "cuda" else threads


def contended(other_cores: float | None, threads: int | None, n_cores: int) -> bool | None:
    """Whether others' load (`other_cores`) exceeds the cores a point needing `threads` leaves
    free of `n_cores`, plus SPARE_CORES; None where either is unknown."""
    if other_cores is None or threads is None:
        return None
    return other_cores > max(n_cores - threads, 0) + SPARE_CORES


def before_sweep(other_cores: float | None) -> dict[str, Any]:
    """env.json's load as a sweep starts: load average, cores, and the cores other processes
    used while it calibrated."""
    return {
        "load_average_1m": load_average_1m(),
        "cores": cores(),
        "other_load_cores": other_cores,
    }


def busy_reasons(env: Mapping[str, Any]) -> list[str]:
    """Why the machine was busy as the sweep started (env.json's `load` and CPU calibration
    spread), as short phrases; empty where it was not or nothing says."""
    load = env.get("load") or {}
    n = load.get("cores") or cores()
    reasons = []
    avg = load.get("load_average_1m")
    if avg is not None and avg >= BUSY_LOAD_PER_CORE * n:
        reasons.append(f"load average {avg:.1f} on {n} cores")
    others = load.get("other_load_cores")
    if others is not None and others > SPARE_CORES:
        reasons.append(f"other processes used {others:.1f} of {n} cores during calibration")
    for prec, peak in ((env.get("matmul_peaks") or {}).get("cpu") or {}).items():
        spread = peak.get("round_spread") if isinstance(peak, dict) else None
        if spread is not None and spread > BUSY_CALIBRATION_SPREAD:
            reasons.append(f"the {prec} matmul calibration varied {spread:.0%} between rounds")
            break
    return reasons


def busy_line(env: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]) -> str | None:
    """One line for the terminal and report where the machine was busy before or during the
    sweep (how busy, rows marked, what it means); None where it was not."""
    reasons = busy_reasons(env)
    rows = list(rows)
    busy = [r for r in rows if r.get("busy") is True]
    if busy:
        others = max(float(r["other_load_cores"]) for r in busy)
        n = (env.get("load") or {}).get("cores") or cores()
        reasons.append(
            f"{len(busy)} of {len(rows)} points shared the CPU with other processes "
            f"(up to {others:.1f} of {n} cores), marked busy"
        )
    if not reasons:
        return None
    return (
        f"busy machine: {'; '.join(reasons)}. Contended step times are slower and noisier "
        "than this machine's speed (fewer --threads, or a quiet machine, give cleaner figures)"
    )
