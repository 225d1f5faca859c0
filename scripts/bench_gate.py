"""Show the benchmark regression gate working, and measure the noise that sets its threshold.

    PYTHONPATH=. python scripts/bench_gate.py [--field min|median|mean] [--threshold PCT]
                                              [--slowdown N] [-- PYTEST_ARGS]

Runs the benchmark suite (tests/benchmarks, or what PYTEST_ARGS select) for real four times
against one pytest-benchmark storage folder:
  1. `base`: the baseline, saved with its raw step times;
  2. `rerun`: unchanged, saved too; how much each benchmark's min and median grew from
     1 to 2 is the noise the threshold must clear (printed: median, p90, max over benchmarks);
  3. unchanged again, gated: --benchmark-compare=0001 --benchmark-compare-fail=FIELD:PCT% (must
     pass; FIELD min by default, see DEFAULT_FIELD);
  4. slowed down (GPUBENCH_TEST_EXTRA_FORWARDS=N: N extra forward passes per step, a test-only
     hook in tests/benchmarks/conftest.py) and gated the same way (must fail).
It also runs `pytest-benchmark compare` on the storage (which must list the saved runs). Files go
under $OUT (or a temporary folder); the summary table is printed last. Exit status 0 when the
gate passed the unchanged run and failed the slowed one, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Measured on the project's shared 2-core machine (README, "Benchmarks in CI"): between two
# unchanged runs the min step time of a benchmark grew by up to 102%, the median by up to 460%;
# twice the largest growth of the min: 200%.
DEFAULT_FIELD = "min"
DEFAULT_THRESHOLD_PCT = 200


def pytest_run(args: list[str], env: dict[str, str], log: Path) -> tuple[int, float]:
    """Run pytest with `args`; returns its exit status and wall time (s). Output goes to `log`."""
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as f:
        rc = subprocess.run(
            [sys.executable, "-m", "pytest", *args], env=env, stdout=f, stderr=subprocess.STDOUT
        ).returncode
    return rc, time.perf_counter() - start


def stat(path: Path, field: str) -> dict[str, float]:
    """Each benchmark's `field` statistic (seconds), by full name."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {b["fullname"]: b["stats"][field] for b in doc["benchmarks"]}


def growth_pct(base: Path, rerun: Path, field: str) -> list[float]:
    """How much slower each benchmark's `field` was in `rerun` than in `base` (%), sorted."""
    a, b = stat(base, field), stat(rerun, field)
    return sorted((b[k] / a[k] - 1) * 100 for k in a if k in b)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--field", choices=("min", "median", "mean"), default=DEFAULT_FIELD)
    parser.add_argument("--threshold", type=int, default=DEFAULT_THRESHOLD_PCT, metavar="PCT")
    parser.add_argument("--slowdown", type=int, default=10, metavar="N", help="extra forwards")
    parser.add_argument("pytest_args", nargs="*", default=["tests/benchmarks"])
    args = parser.parse_args()

    out = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="bench_gate_"))
    out.mkdir(parents=True, exist_ok=True)
    storage = out / "benchmarks"
    common = [
        *args.pytest_args,
        "-q",
        "-p",
        "no:cacheprovider",
        "--benchmark-enable",
        "--benchmark-only",
        f"--benchmark-storage=file://{storage}",
        "--benchmark-columns=median,iqr,rounds",
        "--benchmark-sort=name",
    ]
    env = {k: v for k, v in os.environ.items() if k != "GPUBENCH_TEST_EXTRA_FORWARDS"}
    gate = ["--benchmark-compare=0001", f"--benchmark-compare-fail={args.field}:{args.threshold}%"]
    runs = [
        ("base", [*common, "--benchmark-save=base", "--benchmark-save-data"], env),
        ("rerun", [*common, "--benchmark-save=rerun", "--benchmark-save-data"], env),
        ("gate, unchanged", [*common, *gate], env),
        (
            f"gate, {args.slowdown} extra forwards",
            [*common, *gate],
            {**env, "GPUBENCH_TEST_EXTRA_FORWARDS": str(args.slowdown)},
        ),
    ]
    results = []
    for i, (name, run_args, run_env) in enumerate(runs, start=1):
        rc, wall = pytest_run(run_args, run_env, out / f"run{i}.log")
        results.append((name, rc, wall))
        print(f"run {i} ({name}): exit {rc} in {wall:.0f} s; log {out / f'run{i}.log'}")

    listing = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "--storage", f"file://{storage}", "compare"],
        capture_output=True,
        text=True,
    )
    (out / "pytest_benchmark_compare.txt").write_text(
        listing.stdout + listing.stderr, encoding="utf-8"
    )
    print(listing.stdout.strip())

    saved = {name: sorted(storage.rglob(f"{name}.json")) for name in ("0001_base", "0002_rerun")}
    if not all(saved.values()) or not all(
        json.loads(files[0].read_text(encoding="utf-8"))["benchmarks"] for files in saved.values()
    ):
        # a gate that timed nothing passes whatever the code does: never call that behaving
        print(f"the runs saved no benchmarks (all skipped or deselected?); see {out}/run1.log")
        return 1
    base_json, rerun_json = saved["0001_base"][0], saved["0002_rerun"][0]
    regressed = "Performance has regressed" in (out / "run4.log").read_text(encoding="utf-8")
    ok = results[2][1] == 0 and results[3][1] != 0 and regressed and listing.returncode == 0
    print("\nnoise: growth of each benchmark's statistic from the baseline to the unchanged rerun")
    for field in ("min", "median"):
        g = growth_pct(base_json, rerun_json, field)
        p90 = g[min(len(g) - 1, int(0.9 * len(g)))]
        print(
            f"  {field:<6} over {len(g)} benchmarks: median {statistics.median(g):+.0f}%, "
            f"p90 {p90:+.0f}%, max {g[-1]:+.0f}% (smallest {g[0]:+.0f}%)"
        )
    print(f"gate: --benchmark-compare-fail={args.field}:{args.threshold}%")
    print(f"{'run':<28} {'exit':>4} {'wall s':>7}  expected")
    expected = ["0 (saved)", "0 (saved)", "0 (gate passes)", "non-zero (gate fails)"]
    for (name, rc, wall), want in zip(results, expected, strict=True):
        print(f"{name:<28} {rc:>4} {wall:>7.0f}  {want}")
    print(f"gate behaves: {'yes' if ok else 'NO'}; files in {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
