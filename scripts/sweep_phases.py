"""Where the default sweep's time goes: runs `python -m gpubench sweep --quiet` (or the sweep
arguments given after --) into a fresh folder and prints each phase's seconds and share, with
the load average before and after. With --from DIR it reads a run folder already made (no
start-up or exit figures then). The figures come from the run's own phases.json and rows
(gpubench.run.phases); this script only launches and prints.

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

from gpubench.run import phases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="run_dir", type=Path, help="read this run folder instead")
    ap.add_argument("--out", type=Path, help="run folder to create (default: a temporary one)")
    ap.add_argument("sweep_args", nargs="*", help="further `gpubench sweep` arguments, after --")
    args = ap.parse_args()
    if args.run_dir is not None:
        print(phases.table(phases.breakdown(args.run_dir)))
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
    print(phases.table(phases.breakdown(out, launched, ended)))
    print(
        f"wall clock {ended - launched:.1f} s; load average (1 min) {load_before[0]:.2f} "
        f"before, {load_after[0]:.2f} after; {os.cpu_count()} cores"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
