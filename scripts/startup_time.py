"""How long the command line takes to answer before it does any work: each command run `--runs`
times in a fresh process, printed with the median and range of its wall time and the machine's
1-minute load average before and after (a figure taken on a busy machine says so).

    python scripts/startup_time.py            # --help, sweep --batch-sizes 0, list, explain
    python scripts/startup_time.py --runs 9
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "results" / "20261128-cpu-default-minute" / "run-1"
COMMANDS: list[list[str]] = [
    ["--help"],
    ["sweep", "--batch-sizes", "0"],
    ["sweep", "--help"],
    ["list"],
    ["explain", str(FOLDER)],
]


def wall_times(command: list[str], runs: int) -> list[float]:
    """Seconds each of `runs` fresh runs of `command` took, its output discarded."""
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        out.append(time.perf_counter() - start)
    return out


def line(name: str, times: list[float]) -> str:
    return (
        f"{name:<40} median {statistics.median(times):6.3f} s "
        f"(min {min(times):.3f}, max {max(times):.3f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per command")
    runs = parser.parse_args().runs
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}; {runs} runs per command")
    print(
        line(
            "python -c pass (the interpreter alone)",
            wall_times([sys.executable, "-c", "pass"], runs),
        )
    )
    for args in COMMANDS:
        shown = " ".join(Path(a).name if a.startswith("/") else a for a in args)
        times = wall_times([sys.executable, "-m", "gpubench", *args], runs)
        print(line(f"gpubench {shown}", times))
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
