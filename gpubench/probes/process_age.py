"""How long this process has run: the interpreter's start and its imports (torch's take
seconds) count towards a wall-clock budget that the user set for the whole command."""

from __future__ import annotations

import os


def process_age_s() -> float | None:
    """Seconds since this process started (Linux: /proc/self/stat's start time against
    /proc/uptime); None where the system does not say."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        # the command name (field 2) may hold spaces: the fields after it start at ") "
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
