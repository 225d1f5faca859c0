"""How often `compare --ab` fails: unchanged code (A/A) and a head slowed by a known fraction.

    python scripts/ab_rates.py [--runs N] [--fractions F,...] [--out DIR] [-- GATE_FLAGS...]

The figures of issue 52's "Done when" (docs/ci-gate.md). It copies this tree's gpubench package
into a temporary git repository and commits it (branch `base`), then for each fraction f above 0
commits a head (branch `slow-F`) whose training step also runs gradient-free forward passes of
the model on the first k samples of the step's batch, m times, in the head's harness only
(gpubench/harness/step.py's prepared step, which the gate's windows time). The extra work is
sized here, before any gate runs, for each point the gate measures: this process builds the
point with this tree's harness (the point's intra-op threads: one by default), and times plain
steps and steps with one extra forward on k = 1, 2, 4, ... samples up to the whole batch
alternately, in blocks of about BLOCK_S (a step at the least; the geometric mean of PASSES
blocks' ratios per k, the ks taken in turn; made non-decreasing in k, as more samples never
cost less). The k whose added time is f of the plain step is interpolated linearly between
the measured ks around it (m = 1; m > 1 only where the whole batch's forward adds less than
f). It then checks the choice the same way over PASSES blocks and prints the head's step
time over the base's (the target is 1 + f). The gate reads the same slowdown as its head/base
ratio of samples/s, about 1/(1 + f), printed per run.

Each fraction's gate runs N times (`python -m gpubench compare --ab base GATE_FLAGS` from the
repository on the fraction's branch; fraction 0 is the base against itself, an A/A), run by
run with the fractions in turn, each run's ab.json kept under --out where given, and the
script prints per run its exit status, wall time, each point's head/base ratio and 95% interval,
and the load average (1 minute) before and after, then per fraction the failures out of N. The
default GATE_FLAGS are none: the gate's default points and rounds. Exit status 0 when every run
ended with 0 or 1 (the gate's answers), 1 where one did not (its output is printed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

import gpubench
from gpubench.cli import ab_args, parser
from gpubench.config.spec import Point
from gpubench.harness.step import PreparedStep, backend_flags, build_workload, prepare
from gpubench.harness.timing import synchronize
from gpubench.harness.train import Trainer
from gpubench.store import ab_record
from gpubench.store.wording import number, percent, seconds, span, times

PACKAGE = Path(gpubench.__file__).parent
STEP_FILE = Path("gpubench") / "harness" / "step.py"
# The sizing's blocks: as the gate's windows (run.ab), short and many, alternating plain and
# slowed steps, since the machine's pace moves by tens of percent within a second (9 blocks of
# 0.1 s sized cnn/small's 10% at x0.975 once, on the quiet 2-core CPU)
BLOCK_S = 0.02
PASSES = 41
PLAIN = "lambda: trainer.step(*batches.next())"
SLOWED = "lambda: _injected_step(trainer, batches, point)"
# The head's extra work, appended to its harness/step.py; the same text sizes it here (exec'd).
INJECTED = '''

# Injected by scripts/ab_rates.py (a test head, never committed to gpubench): per point label,
# (k, m): m gradient-free forward passes on the first k samples of each step's batch.
_INJECTED: dict[str, tuple[int, int]] = {table}


def extra_forwards(trainer: Trainer, inputs: Tensor, k: int, m: int) -> None:
    """m forward passes of the trainer's model on inputs[:k], without gradients, in the step's
    autocast."""
    with torch.no_grad(), torch.autocast(
        trainer.device.type,
        dtype=trainer.autocast_dtype or torch.float32,
        enabled=trainer.autocast_dtype is not None,
    ):
        for _ in range(m):
            trainer.model(inputs[:k])


def _injected_step(trainer: Trainer, batches, point: Point) -> Tensor:
    inputs, targets = batches.next()
    k, m = _INJECTED.get(point.label(), (0, 0))
    if m:
        extra_forwards(trainer, inputs, k, m)
    return trainer.step(inputs, targets)
'''


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args],
        check=True,
        capture_output=True,
    )


def _block_s(fn: Callable[[], object], steps: int, device: torch.device) -> float:
    """Seconds of `steps` calls of fn, the device synchronised before and after."""
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    synchronize(device)
    return time.perf_counter() - t0


class Sizer:
    """One point built with this tree's harness, to size and check its extra forward passes."""

    def __init__(self, point: Point) -> None:
        self.point = point
        self.device = torch.device(point.device)
        self.prepared: PreparedStep = prepare(point, build_workload(point))
        namespace: dict[str, object] = {"torch": torch, "Trainer": Trainer, "Point": Point}
        namespace["Tensor"] = torch.Tensor
        exec(INJECTED.format(table="{}"), namespace)
        self.extra = namespace["extra_forwards"]
        self.inputs, _ = self.prepared.batches.next()
        for _ in range(10):  # warm
            self.prepared.step()
        one = _block_s(self.prepared.step, 3, self.device) / 3
        # blocks of about BLOCK_S, a step at the least: the gate's windows (run.ab)
        self.steps = max(1, round(BLOCK_S / max(one, 1e-6)))
        self.costs: dict[int, float] = {}

    def _slowed(self, k: int, m: int) -> Callable[[], object]:
        def slowed() -> object:
            self.extra(self.prepared.trainer, self.inputs, k, m)  # type: ignore[operator]
            return self.prepared.step()

        return slowed

    def measure_costs(self, passes: int = PASSES) -> None:
        """What one extra forward on k samples adds to the step, as a fraction of the plain
        step, for k = 1, 2, 4, ... and the whole batch: `passes` passes over every k, each
        timing a block of plain steps and one of slowed steps, the geometric mean of a k's
        ratios less 1; then made non-decreasing in k (a k's figure is the least of its and every
        larger k's: more samples never cost less, so a higher figure is the machine's noise)."""
        batch = int(self.inputs.shape[0])
        ks = sorted({*(2**i for i in range(batch.bit_length()) if 2**i <= batch), batch})
        ratios: dict[int, list[float]] = {k: [] for k in ks}
        for _ in range(passes):  # round-robin: the machine's drift falls on every k alike
            for k in ks:
                base = _block_s(self.prepared.step, self.steps, self.device)
                head = _block_s(self._slowed(k, 1), self.steps, self.device)
                ratios[k].append(head / base)
        least = float("inf")
        for k in reversed(ks):
            least = min(least, statistics.geometric_mean(ratios[k]) - 1)
            self.costs[k] = least
        self.costs = dict(sorted(self.costs.items()))

    def size(self, fraction: float) -> tuple[int, int]:
        """(k, m) whose extra forward passes take the nearest to `fraction` of the plain step
        (after measure_costs); m > 1 only where the whole batch's forward adds less."""
        return choose(self.costs, fraction)

    def check(self, k: int, m: int, blocks: int = PASSES) -> float:
        """The slowed step's time over the plain step's: the geometric mean of `blocks`
        blocks' ratios, the two timed alternately."""
        ratios = []
        for _ in range(blocks):
            base = _block_s(self.prepared.step, self.steps, self.device)
            head = _block_s(self._slowed(k, m), self.steps, self.device)
            ratios.append(head / base)
        return statistics.geometric_mean(ratios)


def choose(costs: dict[int, float], fraction: float) -> tuple[int, int]:
    """(k, m) from `costs` (k to the fraction of the step one extra forward on k samples adds,
    non-decreasing in k): m = 1 and k interpolated linearly between the measured ks whose costs
    bracket `fraction` (the least k where none is below it); where even the largest k adds
    less, that k, repeated m = fraction / its cost times (rounded, at least 1)."""
    ks = sorted(costs)
    top = ks[-1]
    if costs[top] < fraction:
        return top, max(1, round(fraction / max(costs[top], 1e-3)))
    hi = next(k for k in ks if costs[k] >= fraction)
    below = [k for k in ks if k < hi]
    if not below or costs[hi] == costs[below[-1]]:
        return hi, 1
    lo = below[-1]
    share = (fraction - costs[lo]) / (costs[hi] - costs[lo])
    return min(hi, max(lo, round(lo + share * (hi - lo)))), 1


def _points(gate_flags: list[str]) -> list[Point]:
    """The points `compare --ab base GATE_FLAGS` measures."""
    args = parser.build_parser().parse_args(["compare", "--ab", "base", *gate_flags])
    return ab_args.points_from_args(args)


def sized(points: list[Point], fractions: list[float]) -> dict[float, dict[str, tuple[int, int]]]:
    """Per fraction above 0, per point label, the (k, m) sized to that fraction of its step,
    each checked (printed)."""
    tables: dict[float, dict[str, tuple[int, int]]] = {f: {} for f in fractions if f > 0}
    threads = torch.get_num_threads()
    for point in points:
        torch.set_num_threads(point.threads or threads)
        try:
            with backend_flags(point):
                sizer = Sizer(point)
                sizer.measure_costs()
                added = ", ".join(f"{k}: {percent(c)}" for k, c in sizer.costs.items())
                print(f"{point.label()}: one extra forward on k samples adds {added}", flush=True)
                for f, table in tables.items():
                    k, m = table[point.label()] = sizer.size(f)
                    ratio = sizer.check(k, m)
                    print(
                        f"{percent(f)} of {point.label()}'s step: {m} extra forward(s) on {k} "
                        f"of {point.batch_size} samples; the head's step time over the base's "
                        f"{times(ratio)} (target {times(1 + f)})",
                        flush=True,
                    )
        finally:
            torch.set_num_threads(threads)
    return tables


def make_repo(root: Path, tables: dict[float, dict[str, tuple[int, int]]]) -> dict[float, str]:
    """The repository: branch `base` (this tree's package) and one slowed branch per fraction
    of `tables` (sized); returns each fraction's branch (0: `base`)."""
    shutil.copytree(PACKAGE, root / "gpubench", ignore=shutil.ignore_patterns("__pycache__"))
    _git(root, "init", "-q", "-b", "base")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "base")
    text = (root / STEP_FILE).read_text()
    if text.count(PLAIN) != 1:
        raise RuntimeError(f"{STEP_FILE} has not one `{PLAIN}` to slow down")
    branches: dict[float, str] = {0.0: "base"}
    for f, table in tables.items():
        branch = f"slow-{f:g}"
        _git(root, "checkout", "-q", "-b", branch, "base")
        head = text.replace(PLAIN, SLOWED) + INJECTED.format(table=repr(table))
        (root / STEP_FILE).write_text(head)
        _git(root, "commit", "-q", "-am", f"slowed by {f:g} of the step")
        branches[f] = branch
    _git(root, "checkout", "-q", "base")
    return branches


def gate_run(root: Path, branch: str, gate_flags: list[str], out: Path) -> bool:
    """One gate on `branch` against `base`, printed; False where it ended other than 0 or 1."""
    _git(root, "checkout", "-q", branch)
    before = os.getloadavg()[0]
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gpubench", "compare", "--ab", "base", *gate_flags],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    after = os.getloadavg()[0]
    print(
        f"  exit {done.returncode} in {seconds(wall)}, load average {number(before)} before, "
        f"{number(after)} after",
        flush=True,
    )
    if done.returncode not in (0, 1):
        print(done.stdout + done.stderr, flush=True)
        return False
    record = ab_record.read(out)
    if record is not None:
        for p in record.points:
            name = p.point.get("model", "?")
            print(f"    {name}: {times(p.ratio)} ({span(p.low, p.high)}) {p.reading}", flush=True)
    return True


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--runs", type=int, default=10, help="gate runs per fraction (default 10)")
    cli.add_argument(
        "--fractions",
        default="0,0.05,0.1,0.2",
        help="the head's extra work, as fractions of the step (0: A/A; default 0,0.05,0.1,0.2)",
    )
    cli.add_argument(
        "--out",
        type=Path,
        help="keep each gate run's ab.json in OUT/<fraction>-<run>/ (default: not kept)",
    )
    cli.add_argument("gate", nargs=argparse.REMAINDER, help="-- and the gate's flags")
    args = cli.parse_args()
    fractions = [float(f) for f in args.fractions.split(",")]
    gate_flags = args.gate[1:] if args.gate[:1] == ["--"] else args.gate
    tables = sized(_points(gate_flags), fractions)
    ok = True
    with tempfile.TemporaryDirectory(prefix="gpubench-ab-rates-") as tmp:
        root = Path(tmp) / "repo"
        branches = make_repo(root, tables)
        failures = dict.fromkeys(fractions, 0)
        # run by run, each fraction in turn: the machine's drift over the hour falls on every
        # fraction alike, and a run cut short has figures for each
        for i in range(args.runs):
            for f in fractions:
                print(f"fraction {percent(f)}, run {i + 1} of {args.runs}:", flush=True)
                # absolute: the gate runs in the repository, not here
                out = (args.out.resolve() if args.out else Path(tmp)) / f"{f:g}-{i + 1}"
                ok = gate_run(root, branches[f], [*gate_flags, "--out", str(out)], out) and ok
                record = ab_record.read(out) if (out / ab_record.FILE).exists() else None
                failures[f] += record is not None and record.exit_code() == 1
    print("fraction  failed")
    for f in fractions:
        print(f"{percent(f):>8}  {failures[f]} of {args.runs}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
