"""How long this process has run: the interpreter's start and its imports (torch's take
seconds) count towards a wall-clock budget that the user set for the whole command."""

from __future__ import annotations

import os

from gpubench.probes.process_tree import stat_fields


def process_age_s() -> float | None:
    """Seconds since this process started (Linux: /proc/self/stat's start time against
    /proc/uptime); None where the system does not say."""
    fields = stat_fields(os.getpid())
    if fields is None:
        return None
    try:
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        start_ticks = int(fields[19])  # starttime: field 22 of stat, 20th after the name
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
