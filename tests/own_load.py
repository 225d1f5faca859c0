"""Processes that keep a core busy, for the busy-machine tests (not part of gpubench): a
sampler-like reading function that burns CPU in gpubench's NVML sampling process, and
spinners that are gpubench's own (children) or foreign (daemons outside its process tree)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from gpubench.probes.nvml_readings import Reading


def burn(cpu_s: float) -> None:
    """Keep this process's CPU busy until it has used `cpu_s` more seconds of CPU time."""
    end = time.process_time() + cpu_s
    while time.process_time() < end:
        pass


def burning_reader(first_s: float, each_s: float) -> Callable[[], Reading]:
    """A reading function for probes.sampler_process that burns `first_s` CPU seconds on its
    first reading (before the sampler says it is ready: inside the window) and `each_s` on
    every later one: with the sampler's 10 ms wait after each reading, 10 ms is half a core."""
    first = [True]

    def read() -> Reading:
        burn(first_s if first[0] else each_s)
        first[0] = False
        return Reading(t_s=time.perf_counter())

    return read


def cpu_s(pid: int) -> float:
    """CPU seconds process `pid` has used (all its threads, and the children it reaped), from
    /proc/<pid>/stat; 0 once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


# Run by `python -c`: fork a daemon (a session of its own, reparented away from this process
# tree once its parent exits), print its pid, exit. The daemon waits until it is reparented,
# then burns argv[1] CPU seconds (a negative number: until killed, at most 600 s), creates the
# file argv[2] and exits.
_DAEMON = """
import os, sys, time
cpu_s, done = float(sys.argv[1]), sys.argv[2]
parent = os.getpid()
pid = os.fork()
if pid:
    print(pid, flush=True)
    os._exit(0)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
while os.getppid() == parent:
    time.sleep(0.001)
end = time.process_time() + (cpu_s if cpu_s >= 0 else 600.0)
while time.process_time() < end:
    pass
open(done, "w").close()
"""


@contextlib.contextmanager
def foreign_burner(cpu_s: float, done: Path) -> Iterator[int]:
    """A process outside this process's tree (a daemon of its own session, whose parent has
    exited) that burns `cpu_s` CPU seconds (negative: until the block ends), then creates
    `done`; yields its pid, and kills it when the block ends."""
    out = subprocess.run(
        [sys.executable, "-c", _DAEMON, str(cpu_s), str(done)],
        check=True,
        capture_output=True,
        text=True,
    )
    pid = int(out.stdout.strip())
    try:
        yield pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def wait_for(path: Path, timeout_s: float = 120.0) -> None:
    """Wait until `path` exists (a burner's "done" file); TimeoutError after `timeout_s`."""
    end = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > end:
            raise TimeoutError(f"{path} did not appear within {timeout_s:g} s")
        time.sleep(0.01)
